// CPU reference for ops::stridedCopy.
#pragma once

#include <cstdint>
#include <span>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops::ref {

// dst[dst_start + sum i_a dst_strides[a]] (= or +=) alpha * src[src_start + ...] over space.
void stridedCopy(const Shape& space, const float* src, std::span<const int64_t> src_strides,
                 int64_t src_start, float* dst, std::span<const int64_t> dst_strides,
                 int64_t dst_start, float alpha = 1.0f, Write w = Write::Overwrite);

}  // namespace vkgrad::ops::ref
