// where: cond ? a : b elementwise, the three broadcast on both sides (ops/map_reduce.h), and
// its backward: a's gradient is dout where cond holds (summed over a's broadcast axes), b's
// where it does not. cond (u32, nonzero meaning true) gets none: an attention mask, a
// padding mask.
#include <utility>

#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {
namespace {

struct Where {
  enum In { cond, a, b, kInputs };
  enum Out { result, kOutputs };
};

void backward(Backward& b, const Node& f) {
  const auto& at = f.attr<MapReduceAttrs>();
  const int dout = b.dout(f, Where::result), cond = f.inputs[Where::cond];
  if (b.needs(f, Where::a))
    emitBroadcastGrad(b, f, Where::a, at.space, ops::MapFn::MaskTrue, {cond, dout});
  if (b.needs(f, Where::b))
    emitBroadcastGrad(b, f, Where::b, at.space, ops::MapFn::MaskFalse, {cond, dout});
}

}  // namespace

Tensor Graph::where(Tensor cond, Tensor a, Tensor b) {
  check(cond, "where");
  check(a, "where");
  check(b, "where");
  if (tensor(cond).dtype != DType::U32 || !ops::isFloat(tensor(a).dtype) ||
      !ops::isFloat(tensor(b).dtype))
    throw ShapeError(describe("where", {cond, a, b}) + ": cond must be u32, a and b floats");
  const Shape space =
      ops::broadcastShape("where", shape(cond), ops::broadcastShape("where", shape(a), shape(b)));
  const int c = output(space);
  addNode({OpKind::Where,
           {cond.id, a.id, b.id},
           {c},
           {},
           MapReduceAttrs{ops::MapFn::Where, ops::Fold::Sum, space}});
  return {c};
}

namespace defs {
const OpDef kWhere{.name = "where",
                   .inputs = Where::kInputs,
                   .outputs = Where::kOutputs,
                   .backward = backward,
                   .launch = launchMapReduce};
}  // namespace defs

}  // namespace vkgrad::graph
