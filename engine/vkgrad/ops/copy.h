// dst = src for elements of one dtype: 32-bit (f32 or u32) or 16-bit (f16 or bf16, copied as
// their bits, so nothing is rounded), any view offsets that are multiples of the element size.
// Between formats (f32 to bf16, f16 to f32, ...) it is ops::convert, which rounds.
// Also the plain kernel vkgrad-bench measures the device's copy bandwidth with, the yardstick
// for the bandwidth-bound ops.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

enum class CopyVariant {
  Auto,     // Texel where src is f32 and fits a texel view and dst starts on 16 bytes
  Storage,  // one element per invocation step from a storage buffer (16-bit tensors' only one)
  Texel,    // four words per step: an RGBA32F texel fetch and one 16-byte store (f32 only)
};

const char* copyVariantName(CopyVariant variant);

// src and dst: the same number of elements and the same dtype (shapes may differ, as in a
// reshape; a dtype mismatch names ops::convert); they must not overlap. Throws ShapeError before
// recording anything otherwise, and Error when Texel is asked for and src cannot be read, or dst
// written, that way.
void copy(vk::Recorder& rec, const TensorView& src, const TensorView& dst,
          CopyVariant variant = CopyVariant::Auto);

}  // namespace vkgrad::ops
