// Views: reshape and first-axis slice. A view's output is its input's bytes (same root, at an
// offset), so it has no kernel and no memory; its gradient is the same view of the input's
// gradient (autograd's gradOf), so it needs no backward rule either.
#include <string>

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Reshape {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
};

struct Slice {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
  struct Attrs {
    int64_t begin = 0, end = 0;  // rows of the first axis
  };
};

}  // namespace

Tensor Graph::reshape(Tensor x, const Shape& s) {
  check(x, "reshape");
  if (s.numel() != shape(x).numel())
    throw ShapeError(describe("reshape", {x}) + " -> " + s.str() + ": element counts differ");
  const int y = viewOf(x, s, 0);
  addNode({OpKind::Reshape, {x.id}, {y}});
  return {y};
}

Tensor Graph::slice(Tensor x, int64_t begin, int64_t end) {
  check(x, "slice");
  const Shape sx = shape(x);  // a copy: viewOf may move tensors_
  if (!(0 <= begin && begin < end && end <= sx[0]))
    throw ShapeError(describe("slice", {x}) + " [" + std::to_string(begin) + ", " +
                     std::to_string(end) +
                     "): rows must satisfy 0 <= begin < end <= " + std::to_string(sx[0]));
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i < sx.rank(); ++i) dims[i] = sx[i];
  dims[0] = end - begin;
  // Rows are contiguous, so the view is the root's bytes from the first row on.
  const int y =
      viewOf(x, Shape::of(dims, sx.rank()), uint64_t(begin) * uint64_t(sx.numel() / sx[0]) * 4);
  addNode({OpKind::Slice, {x.id}, {y}, {}, Slice::Attrs{begin, end}});
  return {y};
}

namespace defs {
const OpDef kReshape{
    .name = "reshape", .inputs = Reshape::kInputs, .outputs = Reshape::kOutputs, .view = true};
const OpDef kSlice{
    .name = "slice", .inputs = Slice::kInputs, .outputs = Slice::kOutputs, .view = true};
}  // namespace defs

}  // namespace vkgrad::graph
