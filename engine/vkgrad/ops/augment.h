// Data augmentation on the device: each image of a batch (B,H,W) shifted by a random
// (dx, dy), uniform in [-pad, pad] each, and, when flip is set, mirrored left to right with
// probability 1/2: a random crop of the image padded by `pad` pixels of `fill` on every
// side. The mirror comes first, then the shift:
//
//   out[b, y, x] = in[b, y + dy, mirror ? W-1-(x + dx) : x + dx], fill where y + dy or x + dx
//                  falls outside the image
//
// The draws come from the Philox generator (ops/random.h), so they are a pure function of
// the rng state and stream, the same on every run and on the CPU (ops/reference/augment.h):
// image b uses elements 4b .. 4b+2 of the stream (counter block b):
//   dx = floor(word(4b) * (2*pad + 1) / 2^32) - pad,   dy: the same from word(4b + 1),
//   mirror = flip and word(4b + 2) >= 2^31.
// pad 0 without flip is a copy.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): images (B,H,W), non-empty,
// 0 <= pad < min(H, W) (a shift of a whole image would leave nothing) -> (B,H,W). Throws
// ShapeError "augment: images (2,28,28) with pad 28: the pad must be in [0, 28)".
Shape augmentShape(const Shape& images, int64_t pad);

// images, out: (B,H,W), disjoint, each f32, f16 or bf16 (out rounds a wider value, and the
// fill, once as it stores them); rng: the generator's state (ops/random.h, 4 u32 words).
// Throws ShapeError before recording anything on bad shapes or views.
void augment(vk::Recorder& rec, const TensorView& images, const TensorView& out, int64_t pad,
             bool flip, const TensorView& rng, uint32_t stream = 0, float fill = 0.0f);

}  // namespace vkgrad::ops
