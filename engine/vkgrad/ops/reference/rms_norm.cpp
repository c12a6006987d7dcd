#include "vkgrad/ops/reference/rms_norm.h"

#include <cmath>
#include <vector>

namespace vkgrad::ops::ref {
namespace {

double rstdOf(const float* row, int64_t n, float eps) {
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sq += double(row[i]) * double(row[i]);
  return 1.0 / std::sqrt(sq / double(n) + double(eps));
}

}  // namespace

void rmsNorm(const float* x, const float* gamma, float* y, float* rstd, int64_t rows, int64_t n,
             float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    const double s = rstdOf(row, n, eps);
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = float(double(row[i]) * s * double(gamma[i]));
    rstd[r] = float(s);
  }
}

void rmsNormBackward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                     int64_t rows, int64_t n, float eps) {
  std::vector<double> dg(size_t(n), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    const float* drow = dy + r * n;
    const double s = rstdOf(row, n, eps);
    double dot = 0.0;  // sum of g * xhat
    for (int64_t i = 0; i < n; ++i) {
      const double xhat = double(row[i]) * s;
      dot += double(drow[i]) * double(gamma[i]) * xhat;
      dg[size_t(i)] += double(drow[i]) * xhat;
    }
    if (!dx) continue;
    for (int64_t i = 0; i < n; ++i) {
      const double xhat = double(row[i]) * s;
      dx[r * n + i] = float(s * (double(drow[i]) * double(gamma[i]) - xhat * dot / double(n)));
    }
  }
  if (dgamma)
    for (int64_t i = 0; i < n; ++i) dgamma[i] = float(dg[size_t(i)]);
}

}  // namespace vkgrad::ops::ref
