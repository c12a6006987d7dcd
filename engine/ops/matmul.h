// Matrix multiply C = A·B, row-major fp32. Several kernel variants; the fastest
// shape differs by device (see DESIGN.md), so Auto picks one per device.
#pragma once

#include "ops/tensor.h"
#include "vk/recorder.h"

namespace vkgrad::ops {

enum class MatmulVariant {
  Auto,   // picked per device by matmulVariantFor()
  Naive,  // one invocation per output; storage buffers
  Tiled,  // shared-memory tiles + register blocking: the real-GPU kernel
  Texel,  // texel-buffer fetches, subgroup shuffles, no shared memory: SIMD CPUs (lavapipe)
};

const char* matmulVariantName(MatmulVariant variant);
// The variant Auto resolves to on this device: Texel on CPU devices with subgroup shuffle,
// Tiled elsewhere. (Auto also takes Tiled for an operand too large for a texel view.)
MatmulVariant matmulVariantFor(const vk::Context& context);

// a: (M,K), b: (K,N), c: (M,N); any M,N,K >= 1 and any offsets that are multiples of 4 bytes.
// Throws ShapeError "matmul: (M,K) x (K2,N) -> ..." before recording anything if the shapes
// disagree or a buffer is too small; Error if Texel is asked for on a device without subgroup
// shuffle, or with an operand larger than a texel view may be.
void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            MatmulVariant variant = MatmulVariant::Auto);

}  // namespace vkgrad::ops
