// expand: x repeated over the axes where it has size 1 (or lacks), numpy's broadcast_to
// (ops/map_reduce.h), materialised: the explicit form of a broadcast that no kernel fuses.
// Its backward sums dout over those axes.
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {
namespace {

struct Expand {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
};

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Expand::x)) return;
  const auto& at = f.attr<MapReduceAttrs>();
  emitBroadcastGrad(b, f, Expand::x, at.space, ops::MapFn::X, {b.dout(f, Expand::y)});
}

}  // namespace

Tensor Graph::expand(Tensor x, const Shape& to) {
  check(x, "expand");
  if (!ops::isFloat(tensor(x).dtype))
    throw ShapeError(describe("expand", {x}) + ": x must be floats");
  if (shape(x).rank() > to.rank() || ops::broadcastShape("expand", shape(x), to) != to)
    throw ShapeError("expand: " + shape(x).str() + " does not broadcast to " + to.str());
  const int y = output(to);
  addNode({OpKind::Expand, {x.id}, {y}, {}, MapReduceAttrs{ops::MapFn::X, ops::Fold::Sum, to}});
  return {y};
}

namespace defs {
const OpDef kExpand{.name = "expand",
                    .inputs = Expand::kInputs,
                    .outputs = Expand::kOutputs,
                    .backward = backward,
                    .launch = launchMapReduce};
}  // namespace defs

}  // namespace vkgrad::graph
