// transpose: x with its axes permuted, y axis i = x axis perm[i] (ops/strided_copy.h reads x
// through the permuted strides), and its backward: dout transposed by the inverse
// permutation, added where the gradient already holds something.
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/ops/strided_copy.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Transpose {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
  struct Attrs {
    std::vector<int> perm;
  };
};

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Transpose::x)) return;
  const auto& perm = f.attr<Transpose::Attrs>().perm;
  std::vector<int> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[size_t(perm[i])] = int(i);
  b.emit(OpKind::Transpose, f, Transpose::x, {b.dout(f, Transpose::y)},
         Transpose::Attrs{std::move(inverse)});
}

void launch(const Launch& l) {
  const auto& perm = l.attr<Transpose::Attrs>().perm;
  const ops::TensorView x = l.in(Transpose::x), y = l.out(Transpose::y);
  const auto x_strides = ops::contiguousStrides(x.shape),
             y_strides = ops::contiguousStrides(y.shape);
  int64_t read[Shape::kMaxRank] = {};
  for (size_t i = 0; i < perm.size(); ++i) read[i] = x_strides[size_t(perm[i])];
  ops::stridedCopy(l.rec, "transpose", y.shape, {x, std::span(read, perm.size()), 0},
                   {y, std::span(y_strides.data(), perm.size()), 0}, 1.0f, l.write(Transpose::y));
}

}  // namespace

Tensor Graph::transpose(Tensor x, const std::vector<int>& perm) {
  check(x, "transpose");
  const Shape& s = shape(x);
  std::string text = "(";
  for (size_t i = 0; i < perm.size(); ++i) text += (i ? "," : "") + std::to_string(perm[i]);
  const std::string shapes = describe("transpose", {x}) + ", perm " + text + ")";
  if (int(perm.size()) != s.rank()) throw ShapeError(shapes + ": perm needs x's rank");
  int64_t dims[Shape::kMaxRank];
  uint32_t seen = 0;
  for (int i = 0; i < s.rank(); ++i) {
    const int from = perm[size_t(i)];
    if (from < 0 || from >= s.rank() || (seen >> from & 1u))
      throw ShapeError(shapes + ": not a permutation");
    seen |= 1u << from;
    dims[i] = s[from];
  }
  const int y = output(Shape::of(dims, s.rank()), tensor(x).dtype, tensor(x).differentiable);
  addNode({OpKind::Transpose, {x.id}, {y}, {}, Transpose::Attrs{perm}});
  return {y};
}

namespace defs {
const OpDef kTranspose{.name = "transpose",
                       .inputs = Transpose::kInputs,
                       .outputs = Transpose::kOutputs,
                       .backward = backward,
                       .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
