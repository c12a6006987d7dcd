#include "vkgrad/ops/reference/rope.h"

#include <cmath>

namespace vkgrad::ops::ref {

void rope(const float* x, const float* inv_freq, float* y, int64_t b, int64_t t, int64_t h,
          int64_t d, uint32_t offset, bool inverse, int64_t rotated_heads) {
  const int64_t half = d / 2;
  for (int64_t row = 0; row < b * t * h; ++row) {
    const uint32_t pos = uint32_t((row / h) % t) + offset;
    if (rotated_heads >= 0 && row % h >= rotated_heads) {
      for (int64_t i = 0; i < d; ++i) y[row * d + i] = x[row * d + i];
      continue;
    }
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(pos) * inv_freq[i];  // rounded to f32, as PyTorch
      const double c = std::cos(double(angle)),
                   s = (inverse ? -1.0 : 1.0) * std::sin(double(angle));
      const double lo = x[row * d + i], hi = x[row * d + i + half];
      y[row * d + i] = float(lo * c - hi * s);
      y[row * d + i + half] = float(hi * c + lo * s);
    }
  }
}

}  // namespace vkgrad::ops::ref
