// reduce: the sum, mean or maximum of x over any set of axes (ops/map_reduce.h), the axes
// dropped or kept as 1s, and its backward: a sum's or mean's gradient is dout broadcast back
// over the reduced axes (/ their size for the mean); a maximum's goes to every element equal
// to its maximum (ties each get all of it: random inputs have none).
#include <utility>

#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {
namespace {

struct Reduce {
  enum In { x, kInputs };
  enum Out { y, scratch, kOutputs };  // scratch: a long fold's partial results, or -1
};

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Reduce::x)) return;
  const auto& at = f.attr<MapReduceAttrs>();
  const int dout = b.dout(f, Reduce::y);
  const Shape kept = ops::reducedShape(at.space, at.axes, true);
  MapReduceAttrs grad{ops::MapFn::X, ops::Fold::Sum, at.space, 0, at.alpha, {kept}};
  std::vector<int> inputs{dout, -1, -1};
  if (at.fold == ops::Fold::Max) {
    grad = {ops::MapFn::SelectEqual, ops::Fold::Sum, at.space, 0, 1.0f, {Shape{}, kept, kept}};
    inputs = {f.inputs[Reduce::x], f.outputs[Reduce::y], dout};
  }
  b.emit(OpKind::MapReduce, f, Reduce::x, std::move(inputs), grad, {-1});  // nothing folded
}

}  // namespace

Tensor Graph::reduce(ops::Fold fold, bool mean, Tensor x, const std::vector<int>& axes,
                     bool keep_dims) {
  const char* name = fold == ops::Fold::Max ? "max" : mean ? "mean" : "sum";
  check(x, name);
  if (!ops::isFloat(tensor(x).dtype)) throw ShapeError(describe(name, {x}) + ": x must be floats");
  // A copy, not a reference: output() below adds a tensor, which may move the graph's tensors
  // (and x's shape with them) before the node's attributes read it.
  const Shape s = shape(x);
  const uint32_t mask = axisMask(name, s, axes);
  const Shape out = ops::reducedShape(s, mask, keep_dims);
  const float alpha = mean ? float(double(out.numel()) / double(s.numel())) : 1.0f;
  const int y = output(out);
  const int64_t n_scratch = ops::mapReduceScratch(s, mask);
  const int scratch = n_scratch > 0 ? output({n_scratch}, DType::F32, false, "reduce.scratch") : -1;
  addNode({OpKind::Reduce,
           {x.id},
           {y, scratch},
           {},
           MapReduceAttrs{ops::MapFn::X, fold, s, mask, alpha}});
  return {y};
}

Tensor Graph::sum(Tensor x, const std::vector<int>& axes, bool keep_dims) {
  return reduce(ops::Fold::Sum, false, x, axes, keep_dims);
}

Tensor Graph::mean(Tensor x, const std::vector<int>& axes, bool keep_dims) {
  return reduce(ops::Fold::Sum, true, x, axes, keep_dims);
}

Tensor Graph::max(Tensor x, const std::vector<int>& axes, bool keep_dims) {
  return reduce(ops::Fold::Max, false, x, axes, keep_dims);
}

namespace defs {
const OpDef kReduce{.name = "reduce",
                    .inputs = Reduce::kInputs,
                    .outputs = Reduce::kOutputs,
                    .f32_outputs = 1u << Reduce::scratch,
                    .backward = backward,
                    .launch = launchMapReduce};
}  // namespace defs

}  // namespace vkgrad::graph
