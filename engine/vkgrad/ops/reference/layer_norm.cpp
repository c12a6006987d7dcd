#include "vkgrad/ops/reference/layer_norm.h"

#include <cmath>
#include <vector>

namespace vkgrad::ops::ref {

void layerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
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

void layerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t n, float eps) {
  std::vector<double> sum_gx(n, 0.0), sum_g(n, 0.0), xhat(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    const float* dyr = dy + r * n;
    double mu, rs;
    if (mean && rstd) {
      mu = mean[r], rs = rstd[r];
    } else {
      double sum = 0.0, sq = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += xr[i];
      mu = sum / double(n);
      for (int64_t i = 0; i < n; ++i) sq += (xr[i] - mu) * (xr[i] - mu);
      rs = 1.0 / std::sqrt(sq / double(n) + double(eps));
    }
    double a = 0.0, b = 0.0;  // row sums of g and g * xhat
    for (int64_t i = 0; i < n; ++i) {
      xhat[i] = (xr[i] - mu) * rs;
      const double g = double(dyr[i]) * gamma[i];
      a += g;
      b += g * xhat[i];
      sum_gx[i] += double(dyr[i]) * xhat[i];
      sum_g[i] += dyr[i];
    }
    a /= double(n), b /= double(n);
    for (int64_t i = 0; i < n; ++i)
      dx[r * n + i] = static_cast<float>(rs * (double(dyr[i]) * gamma[i] - a - xhat[i] * b));
  }
  for (int64_t i = 0; i < n; ++i) {
    if (dgamma) dgamma[i] = static_cast<float>(sum_gx[i]);
    if (dbeta) dbeta[i] = static_cast<float>(sum_g[i]);
  }
}

}  // namespace vkgrad::ops::ref
