#include "vkgrad/ops/reference/augment.h"

#include <algorithm>
#include <vector>

namespace vkgrad::ops::ref {
namespace {

int64_t shift(uint32_t bits, int64_t pad) {
  return int64_t((uint64_t(bits) * uint64_t(2 * pad + 1)) >> 32) - pad;
}

}  // namespace

AugmentDraw augmentDraw(const Stream& s, int64_t image, int64_t pad, bool flip) {
  const uint64_t first = 4 * uint64_t(image);
  return {shift(s.word(first), pad), shift(s.word(first + 1), pad),
          flip && s.word(first + 2) >= 0x80000000u};
}

void augment(const Stream& s, const float* images, float* out, int64_t batch, int64_t height,
             int64_t width, int64_t pad, bool flip, float fill) {
  const int64_t ph = height + 2 * pad, pw = width + 2 * pad;
  std::vector<float> canvas(size_t(ph * pw));
  for (int64_t b = 0; b < batch; ++b) {
    const AugmentDraw d = augmentDraw(s, b, pad, flip);
    const float* in = images + b * height * width;
    std::fill(canvas.begin(), canvas.end(), fill);
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        canvas[size_t((y + pad) * pw + x + pad)] = in[y * width + (d.mirror ? width - 1 - x : x)];
    float* o = out + b * height * width;
    for (int64_t y = 0; y < height; ++y)
      for (int64_t x = 0; x < width; ++x)
        o[y * width + x] = canvas[size_t((y + pad + d.dy) * pw + x + pad + d.dx)];
  }
}

}  // namespace vkgrad::ops::ref
