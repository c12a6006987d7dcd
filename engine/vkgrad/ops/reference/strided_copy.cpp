#include "vkgrad/ops/reference/strided_copy.h"

namespace vkgrad::ops::ref {

void stridedCopy(const Shape& space, const float* src, std::span<const int64_t> src_strides,
                 int64_t src_start, float* dst, std::span<const int64_t> dst_strides,
                 int64_t dst_start, float alpha, Write w) {
  for (int64_t e = 0; e < space.numel(); ++e) {
    int64_t rest = e, from = src_start, to = dst_start;
    for (int a = space.rank() - 1; a >= 0; --a) {
      const int64_t i = rest % space[a];
      rest /= space[a];
      from += i * src_strides[size_t(a)];
      to += i * dst_strides[size_t(a)];
    }
    const float v = alpha * src[from];
    dst[to] = w == Write::Accumulate ? dst[to] + v : v;
  }
}

}  // namespace vkgrad::ops::ref
