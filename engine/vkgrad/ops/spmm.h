// Sparse aggregation y = A x over a graph stored as CSR over destinations (runtime/sparse.h),
// and its two gradients. Every output element is one fixed-order sum over one node's edge
// list, so the same inputs give the same bits; no float atomics.
//
//   forward:    y[j, f]  = sum over e in [offsets[j], offsets[j+1]) of w[e, h(f)] x[sources[e], f]
//   transposed: dx[i, f] = sum over k in [t_offsets[i], t_offsets[i+1]), e = t_edges[k],
//                          of w[e, h(f)] dy[destinations[e], f]
//   weights:    dw[e, h] = sum over f in head h of dy[destinations[e], f] x[sources[e], f]
//
// w: none (every weight 1), (E) or (E, H) with H dividing F; head h(f) = f / (F / H)
// weighs features [h F/H, (h+1) F/H). A node with no edges gets 0. The forward and the
// transposed pass are one kernel: the transposed one reads its edges through t_edges.
//
// x, y, dy, dx, the weights and dw are each f32, f16 or bf16 (ops/storage.h), in any mix;
// the index arrays are u32. Sums are f32 whatever the formats; a 16-bit output rounds once,
// when stored.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): x (nodes, F) with F > 0;
// weights absent (nullptr), (edges) or (edges, H) with H dividing F. Returns H (1 without
// weights). Throws ShapeError "spmm: x (4,6), weights (9,4): F = 6 is not a multiple of
// H = 4" and the like.
int64_t spmmHeads(const char* op, int64_t nodes, int64_t edges, const Shape& x,
                  const Shape* weights);

// offsets: (N+1) u32; sources: (E) u32, E >= offsets[N] (an edgeless graph passes one unused
// word); weights: (E) or (E, H), or an empty view (no buffer) for all-ones; x: (N, F);
// y: (N, F), (= or +=) A x.
void spmm(vk::Recorder& rec, const TensorView& offsets, const TensorView& sources,
          const TensorView& weights, const TensorView& x, const TensorView& y,
          Write w = Write::Overwrite);

// The gradient of x: dx (= or +=) Aᵀ dy, through the transpose's arrays (runtime/sparse.h).
// t_offsets: (N+1) u32; t_edges, t_destinations: (E) u32 (the edge ids, and their
// destinations, in the transpose's order; t_edges is read only for weights); weights as for
// spmm; dy, dx: (N, F).
void spmmTransposed(vk::Recorder& rec, const TensorView& t_offsets, const TensorView& t_edges,
                    const TensorView& t_destinations, const TensorView& weights,
                    const TensorView& dy, const TensorView& dx, Write w = Write::Overwrite);

// The gradient of the edge weights: sources, destinations: (E) u32; x, dy: (N, F); dw: (E) or
// (E, H), (= or +=) per edge and head the dot product of dy's destination row and x's source
// row over the head's features, summed in increasing f.
void spmmWeightsBackward(vk::Recorder& rec, const TensorView& sources,
                         const TensorView& destinations, const TensorView& x, const TensorView& dy,
                         const TensorView& dw, Write w = Write::Overwrite);

}  // namespace vkgrad::ops
