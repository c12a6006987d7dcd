#include "vkgrad/ops/reference/log_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vkgrad::ops::ref {

void logSoftmax(const float* x, float* y, int64_t rows, int64_t n) {
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double m = kNegInf;
    for (int64_t i = 0; i < n; ++i) m = std::max(m, double(xr[i]));
    if (m == kNegInf) {
      std::fill(yr, yr + n, -std::numeric_limits<float>::infinity());
      continue;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(double(xr[i]) - m);
    const double lse = m + std::log(sum);
    for (int64_t i = 0; i < n; ++i) yr[i] = static_cast<float>(double(xr[i]) - lse);
  }
}

void logSoftmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * n;
    const float* dyr = dy + r * n;
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += dyr[i];
    for (int64_t i = 0; i < n; ++i)
      dx[r * n + i] = static_cast<float>(double(dyr[i]) - std::exp(double(yr[i])) * sum);
  }
}

}  // namespace vkgrad::ops::ref
