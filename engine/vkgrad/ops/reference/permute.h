// CPU reference for ops::permute: dst axis i = src axis perm[i], row-major, any rank <= 6.
#pragma once

#include <cstdint>
#include <span>

namespace vkgrad::ops::ref {

void permute(const float* src, float* dst, std::span<const int64_t> src_shape,
             std::span<const int> perm);

}  // namespace vkgrad::ops::ref
