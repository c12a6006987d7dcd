// Pooling node features over the graphs of a batch. Batched graphs are block-diagonal: graph
// g owns the contiguous nodes [segments[g], segments[g+1]), so x (N, F) pools to one row per
// graph, (G, F):
//
//   Sum:  out[g, f] = sum of x[n, f] over g's nodes
//   Mean: out[g, f] = that sum / g's node count
//   Max:  out[g, f] = the largest x[n, f] over g's nodes; argmax[g, f] = its node n (the first
//         on ties; a NaN wins, the first one), saved for the backward
//
// An empty graph pools to 0 (the mean and the max of nothing are 0; its argmax is
// kNoNode). Backward: Sum broadcasts dout[g] to g's nodes, Mean divides it by the count, Max
// sends it to the argmax node only. One invocation per (g, f) sums its graph's nodes in node
// order (Kahan), so results are the same bits every run; no atomics. x, out, dout and dx are
// each f32, f16 or bf16 (ops/storage.h), in any mix: sums and comparisons are f32, and a
// 16-bit output rounds once, when stored; segments and argmax are u32.
//
// Segments live on the device, so the host cannot check them. Bad ones still read and write
// nothing out of bounds: each offset is clamped to N, and a graph whose end is below its
// start is empty. The forward is exactly that for any offsets. The backward writes every
// element of dx; it is the exact gradient of the clamped forward for non-decreasing offsets
// (nodes no graph owns get 0), while for decreasing ones, where graphs overlap, a node takes
// the gradient of at most one graph that owns it.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

enum class Pool { Sum, Mean, Max };
const char* poolName(Pool kind);

// The argmax of an empty graph: no node gets its gradient.
constexpr uint32_t kNoNode = 0xffffffffu;

// The shape rule, Vulkan-free (the graph builder uses it too): x (N, F) non-empty float with
// N * F < 2^31, segments (G + 1) u32 with G >= 1. Returns (G, F). Throws ShapeError
// "segmentPool: x (6,3), segments (4,2): segments must be (graphs + 1)".
Shape segmentPoolShape(const char* op, const Shape& x, DType x_dtype, const Shape& segments,
                       DType segments_dtype);

// x: (N, F); segments: (G + 1) u32; out: (G, F); argmax: (G, F) u32 for Max, unused
// (an empty view) otherwise. Outputs never overlap inputs.
void segmentPool(vk::Recorder& rec, Pool kind, const TensorView& x, const TensorView& segments,
                 const TensorView& out, const TensorView& argmax = {});
// segments: (G + 1) u32; argmax: the forward's, for Max (else unused); dout: (G, F);
// dx: (N, F), (= or +=) the gradient above.
void segmentPoolBackward(vk::Recorder& rec, Pool kind, const TensorView& segments,
                         const TensorView& argmax, const TensorView& dout, const TensorView& dx,
                         Write w = Write::Overwrite);

}  // namespace vkgrad::ops
