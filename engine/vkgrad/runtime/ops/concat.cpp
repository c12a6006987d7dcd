// concat: inputs of one shape but along `axis`, joined along it (each copied into its place
// by ops/strided_copy.h), and its backward: each input's gradient is its slice of dout
// (runtime/ops/slice_axis.cpp).
#include <string>
#include <vector>

#include "vkgrad/ops/strided_copy.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {

void emitSliceOf(Backward& b, int t, int dout, int axis, int64_t begin);  // slice_axis.cpp

namespace {

struct Concat {
  enum Out { y, kOutputs };  // inputs: the pieces, any number
  struct Attrs {
    int axis = 0;
  };
};

void backward(Backward& b, const Node& f) {
  const int axis = f.attr<Concat::Attrs>().axis, dout = b.dout(f, Concat::y);
  int64_t begin = 0;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    if (b.needs(f, int(i))) emitSliceOf(b, f.inputs[i], dout, axis, begin);
    begin += b.graph().shape(Tensor{f.inputs[i]})[axis];
  }
}

void launch(const Launch& l) {
  const int axis = l.attr<Concat::Attrs>().axis;
  const ops::TensorView y = l.out(Concat::y);
  const auto y_strides = ops::contiguousStrides(y.shape);
  const size_t rank = size_t(y.shape.rank());
  int64_t begin = 0;
  for (size_t i = 0; i < l.node.inputs.size(); ++i) {
    const ops::TensorView x = l.in(int(i));
    const auto x_strides = ops::contiguousStrides(x.shape);
    ops::stridedCopy(l.rec, "concat", x.shape, {x, std::span(x_strides.data(), rank), 0},
                     {y, std::span(y_strides.data(), rank), begin * y_strides[size_t(axis)]}, 1.0f,
                     l.write(Concat::y));
    begin += x.shape[axis];
  }
}

}  // namespace

Tensor Graph::concat(const std::vector<Tensor>& xs, int axis) {
  if (xs.empty()) throw ShapeError("concat: no inputs");
  for (Tensor x : xs) check(x, "concat");
  const Shape& first = shape(xs[0]);
  axis = normalizeAxis("concat", first, axis);
  std::string shapes = "concat:";
  for (Tensor x : xs) shapes += " " + shape(x).str();
  shapes += " along axis " + std::to_string(axis);
  int64_t dims[Shape::kMaxRank], total = 0;
  bool differentiable = false;
  std::vector<int> ids;
  for (Tensor x : xs) {
    const Shape& s = shape(x);
    if (s.rank() != first.rank() || tensor(x).dtype != tensor(xs[0]).dtype)
      throw ShapeError(shapes + ": the inputs need one rank and one dtype");
    for (int a = 0; a < s.rank(); ++a)
      if (a != axis && s[a] != first[a]) throw ShapeError(shapes + ": sizes differ off the axis");
    total += s[axis];
    differentiable |= tensor(x).differentiable;
    ids.push_back(x.id);
  }
  for (int a = 0; a < first.rank(); ++a) dims[a] = a == axis ? total : first[a];
  const int y = output(Shape::of(dims, first.rank()), tensor(xs[0]).dtype, differentiable);
  addNode({OpKind::Concat, std::move(ids), {y}, {}, Concat::Attrs{axis}});
  return {y};
}

namespace defs {
const OpDef kConcat{.name = "concat",
                    .inputs = 0,
                    .outputs = Concat::kOutputs,
                    .variadic = true,
                    .backward = backward,
                    .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
