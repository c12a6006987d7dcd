#include "ops/reference/layernorm.h"

#include <cmath>

namespace vkgrad::ops::ref {

void layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, int64_t rows, int64_t n, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const double mu = sum / double(n);
    double sq = 0.0;
    for (int64_t i = 0; i < n; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
    const double rs = 1.0 / std::sqrt(sq / double(n) + double(eps));
    for (int64_t i = 0; i < n; ++i)
      y[r * n + i] = static_cast<float>((xr[i] - mu) * rs * gamma[i] + beta[i]);
    mean[r] = static_cast<float>(mu);
    rstd[r] = static_cast<float>(rs);
  }
}

}  // namespace vkgrad::ops::ref
