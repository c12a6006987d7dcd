// Matrix multiply C = A·B, row-major fp32. Several kernel variants; the fastest
// shape differs by device (see DESIGN.md), so Auto picks one per device.
#pragma once

#include "ops/tensor.h"
#include "vk/recorder.h"

namespace vkgrad::ops {

enum class MatmulVariant {
  Auto,   // picked per device by matmulVariantFor()
  Naive,  // one invocation per output; storage buffers
};

const char* matmulVariantName(MatmulVariant variant);
// The variant Auto resolves to on this device.
MatmulVariant matmulVariantFor(const vk::Context& context);

// a: (M,K), b: (K,N), c: (M,N). Throws ShapeError "matmul: (M,K) x (K2,N) -> ..." before
// recording anything if the shapes disagree or a buffer is too small.
void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            MatmulVariant variant = MatmulVariant::Auto);

}  // namespace vkgrad::ops
