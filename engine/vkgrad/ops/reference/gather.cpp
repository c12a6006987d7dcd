#include "vkgrad/ops/reference/gather.h"

#include <vector>

namespace vkgrad::ops::ref {

void gather(const uint32_t* ids, const float* table, float* out, int64_t n, int64_t vocab,
            int64_t dim, int64_t row_stride) {
  const int64_t stride = row_stride > 0 ? row_stride : dim;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < dim; ++d)
      out[r * dim + d] = ids[r] < vocab ? table[ids[r] * stride + d] : 0.0f;
}

void gatherBackward(const uint32_t* ids, const float* dout, float* dtable, int64_t n, int64_t vocab,
                    int64_t dim, bool accumulate) {
  std::vector<double> sum(vocab * dim, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    if (ids[r] >= vocab) continue;
    for (int64_t d = 0; d < dim; ++d) sum[ids[r] * dim + d] += dout[r * dim + d];
  }
  for (int64_t i = 0; i < vocab * dim; ++i)
    dtable[i] = float(accumulate ? double(dtable[i]) + sum[i] : sum[i]);
}

}  // namespace vkgrad::ops::ref
