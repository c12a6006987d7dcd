#include "vkgrad/ops/reference/reduce.h"

#include <vector>

namespace vkgrad::ops::ref {

void sumOverKeptAxis(const float* x, const float* y, float* out, int64_t outer, int64_t kept,
               int64_t inner, double alpha) {
  std::vector<double> sum(kept, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t m = 0; m < kept; ++m)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = (o * kept + m) * inner + k;
        sum[m] += y ? double(x[i]) * y[i] : double(x[i]);
      }
  for (int64_t m = 0; m < kept; ++m) out[m] = float(alpha * sum[m]);
}

}  // namespace vkgrad::ops::ref
