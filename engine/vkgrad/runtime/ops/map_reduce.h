// What the general ops' files share (binary.cpp, where.cpp, reduce.cpp, expand.cpp): their
// nodes all run ops::mapReduce (ops/map_reduce.h) with these attributes, and their gradients
// are MapReduce nodes folding a product over the axes an operand was broadcast along.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"

namespace vkgrad::graph {

struct MapReduceAttrs {
  ops::MapFn fn = ops::MapFn::X;
  ops::Fold fold = ops::Fold::Sum;
  Shape space;         // the broadcast space the element function runs over
  uint32_t axes = 0;   // space axes folded away (bit a: axis a)
  float alpha = 1.0f;  // scales the folded value
  // Input i read as this shape of its elements (rank 0: its own): a reduction's gradient
  // reads dout with the reduced axes kept as 1s, so it broadcasts back over them.
  std::array<Shape, 3> as{};
};

// An axis in [-rank, rank) as one in [0, rank); ShapeError naming op and shape otherwise.
int normalizeAxis(const char* op, const Shape& shape, int axis);
// Axes (negative ones counting from the end; none: all of them) as a bit mask; ShapeError on
// an axis out of range or given twice.
uint32_t axisMask(const char* op, const Shape& shape, std::span<const int> axes);

// Records ops::mapReduce for a node whose inputs (any number up to 3, -1 for none) and
// output 0 are the kernel's, with MapReduceAttrs; output 1, where the node has it, is the
// scratch of a long fold (ops::mapReduceScratch; -1 where none is needed).
void launchMapReduce(const Launch& l);
// The scratch tensor a MapReduce gradient node folding `axes` of space needs, or -1.
int foldScratch(Backward& b, const Shape& space, uint32_t axes);

// The space axes along which `in` (right-aligned) is broadcast: missing, or 1 where the space
// is not.
uint32_t broadcastAxesOf(const Shape& in, const Shape& space);

// Emits the MapReduce node that writes the gradient of input `slot` of forward: alpha * the
// sum of fn(inputs) over the space axes that input was broadcast along (as: shapes the
// inputs are read as, rank 0 for their own).
void emitBroadcastGrad(Backward& b, const Node& forward, int slot, const Shape& space,
                       ops::MapFn fn, std::vector<int> inputs, float alpha = 1.0f,
                       std::array<Shape, 3> as = {});

}  // namespace vkgrad::graph
