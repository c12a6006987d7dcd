#include "vkgrad/ops/reference/softmax.h"

#include <cmath>
#include <limits>

namespace vkgrad::ops::ref {

void softmax(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t i = 0; i < n; ++i) m = std::max(m, double(xr[i]));
    if (m == -std::numeric_limits<double>::infinity()) {
      for (int64_t i = 0; i < n; ++i) yr[i] = 0.0f;
      continue;
    }
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += std::exp(double(xr[i]) - m);
    for (int64_t i = 0; i < n; ++i) yr[i] = static_cast<float>(std::exp(double(xr[i]) - m) / sum);
  }
}

void softmaxBackward(const float* y, const float* dy, float* dx, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* yr = y + r * n;
    const float* dyr = dy + r * n;
    double dot = 0.0;
    for (int64_t i = 0; i < n; ++i) dot += double(dyr[i]) * double(yr[i]);
    for (int64_t i = 0; i < n; ++i)
      dx[r * n + i] = static_cast<float>(double(yr[i]) * (double(dyr[i]) - dot));
  }
}

}  // namespace vkgrad::ops::ref
