// dst = src for 32-bit elements (f32 or u32), any view offsets that are multiples of 4 bytes.
// Also the plain kernel vkgrad-bench measures the device's copy bandwidth with, the yardstick
// for the bandwidth-bound ops.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

enum class CopyVariant {
  Auto,     // Texel where src is f32 and fits a texel view and dst starts on 16 bytes
  Storage,  // one word per invocation step from a storage buffer
  Texel,    // four words per step: an RGBA32F texel fetch and one 16-byte store (f32 only)
};

const char* copyVariantName(CopyVariant variant);

// src and dst: the same number of elements and the same dtype (shapes may differ, as in a
// reshape); they must not overlap. Throws ShapeError before recording anything otherwise, and
// Error when Texel is asked for and src cannot be read, or dst written, that way.
void copy(vk::Recorder& rec, const TensorView& src, const TensorView& dst,
          CopyVariant variant = CopyVariant::Auto);

}  // namespace vkgrad::ops
