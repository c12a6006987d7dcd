// Edge softmax, the attention normalisation of a graph attention network: for every
// destination node j and head h, the softmax of scores[e, h] over j's incoming edges e in
// [offsets[j], offsets[j+1]) (runtime/sparse.h's CSR over destinations), and its backward:
//
//   alpha[e, h]   = exp(s[e, h] - m[j, h]) / sum over e' of j of exp(s[e', h] - m[j, h]),
//                   m[j, h] the largest score of j's edges: stable for any finite score
//   dscores[e, h] = alpha[e, h] (dalpha[e, h] - sum over e' of j of alpha[e', h] dalpha[e', h])
//
// A node with no incoming edges has nothing to normalise. Deterministic: each node's sums
// are fixed-order per lane (Kahan) and then a fixed-order workgroup combine; no atomics.
// scores, alpha, dalpha and dscores are each f32, f16 or bf16 (ops/storage.h), in any mix:
// the max, the sums and the exponentials are f32, and a 16-bit output rounds once, when
// stored (the backward reads alpha as the forward stored it).
//
// Offsets live on the device, so the host cannot check them: graph::uploadGraph validates
// a graph once. Any others still read and write nothing out of bounds: each offset is
// clamped to E, a range whose end is below its start is empty, and an edge that no node's
// range covers is not written.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): offsets (nodes + 1) u32 with
// nodes >= 1, scores (E, H) f32, f16 or bf16, non-empty with E * H < 2^31. Returns scores'
// shape. Throws ShapeError "edgeSoftmax: offsets (5), scores (7): scores must be (edges,
// heads)".
Shape edgeSoftmaxShape(const char* op, const Shape& offsets, DType offsets_dtype,
                       const Shape& scores, DType scores_dtype);

// offsets: (nodes + 1) u32; scores, alpha: (E, H). Outputs never overlap inputs.
void edgeSoftmax(vk::Recorder& rec, const TensorView& offsets, const TensorView& scores,
                 const TensorView& alpha);
// offsets: (nodes + 1) u32; alpha (the forward's output), dalpha, dscores: (E, H),
// dscores (= or +=) the gradient above.
void edgeSoftmaxBackward(vk::Recorder& rec, const TensorView& offsets, const TensorView& alpha,
                         const TensorView& dalpha, const TensorView& dscores,
                         Write w = Write::Overwrite);

}  // namespace vkgrad::ops
