// mapReduce: the node kind the general ops' backward rules emit (a broadcast operand's
// gradient, a reduction's), and the launch every general op shares (runtime/ops/map_reduce.h).
#include "vkgrad/runtime/ops/map_reduce.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {

void launchMapReduce(const Launch& l) {
  const auto& at = l.attr<MapReduceAttrs>();
  std::vector<ops::TensorView> inputs;
  for (size_t i = 0; i < l.node.inputs.size(); ++i) {
    if (l.node.inputs[i] < 0) continue;
    ops::TensorView v = l.in(int(i));
    if (at.as[i].rank() > 0) v.shape = at.as[i];
    inputs.push_back(v);
  }
  // Nodes that fold (reduce, mapReduce) have a second output: the scratch of a long fold, -1
  // (an empty view) where it needs none.
  const ops::TensorView scratch = l.node.outputs.size() > 1 ? l.out(1) : ops::TensorView{};
  ops::mapReduce(l.rec, at.fn, at.fold, inputs, at.space, at.axes, l.out(0), at.alpha, l.write(0),
                 scratch);
}

int normalizeAxis(const char* op, const Shape& shape, int axis) {
  if (axis < -shape.rank() || axis >= shape.rank())
    throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " of " + shape.str() +
                     " is out of range");
  return axis < 0 ? axis + shape.rank() : axis;
}

uint32_t axisMask(const char* op, const Shape& shape, std::span<const int> axes) {
  if (axes.empty()) return (1u << shape.rank()) - 1;
  uint32_t mask = 0;
  for (int axis : axes) {
    const uint32_t bit = 1u << normalizeAxis(op, shape, axis);
    if (mask & bit)
      throw ShapeError(std::string(op) + ": axis " + std::to_string(axis) + " of " + shape.str() +
                       " given twice");
    mask |= bit;
  }
  return mask;
}

uint32_t broadcastAxesOf(const Shape& in, const Shape& space) {
  uint32_t axes = 0;
  const int skip = space.rank() - in.rank();
  for (int a = 0; a < space.rank(); ++a)
    if (space[a] != 1 && (a < skip || in[a - skip] == 1)) axes |= 1u << a;
  return axes;
}

int foldScratch(Backward& b, const Shape& space, uint32_t axes) {
  const int64_t n = ops::mapReduceScratch(space, axes);
  return n > 0 ? b.temp({n}, "mapReduce.scratch") : -1;
}

void emitBroadcastGrad(Backward& b, const Node& forward, int slot, const Shape& space,
                       ops::MapFn fn, std::vector<int> inputs, float alpha,
                       std::array<Shape, 3> as) {
  const Shape& in = b.graph().shape(Tensor{forward.inputs.at(size_t(slot))});
  MapReduceAttrs attrs{fn, ops::Fold::Sum, space, broadcastAxesOf(in, space), alpha, as};
  inputs.resize(3, -1);
  b.emit(OpKind::MapReduce, forward, slot, std::move(inputs), attrs,
         {foldScratch(b, space, attrs.axes)});
}

namespace defs {
const OpDef kMapReduce{.name = "mapReduce",
                       .inputs = 3,
                       .outputs = 2,  // the gradient, the scratch of a long fold (or -1)
                       .f32_outputs = 1u << 1,
                       .launch = launchMapReduce};
}  // namespace defs

}  // namespace vkgrad::graph
