#include "vkgrad/ops/reference/permute.h"

#include <vector>

namespace vkgrad::ops::ref {

void permute(const float* src, float* dst, std::span<const int64_t> src_shape,
             std::span<const int> perm) {
  const size_t rank = src_shape.size();
  std::vector<int64_t> src_strides(rank), dst_shape(rank), index(rank, 0);
  int64_t n = 1;
  for (size_t a = rank; a-- > 0;) src_strides[a] = n, n *= src_shape[a];
  for (size_t i = 0; i < rank; ++i) dst_shape[i] = src_shape[perm[i]];
  // Walk dst in row-major order with a multi-index.
  for (int64_t e = 0; e < n; ++e) {
    int64_t from = 0;
    for (size_t i = 0; i < rank; ++i) from += index[i] * src_strides[perm[i]];
    dst[e] = src[from];
    for (size_t i = rank; i-- > 0;) {
      if (++index[i] < dst_shape[i]) break;
      index[i] = 0;
    }
  }
}

}  // namespace vkgrad::ops::ref
