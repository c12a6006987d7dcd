#include "vkgrad/ops/reference/patchify.h"

namespace vkgrad::ops::ref {
namespace {

// Calls f(patch element, image element) for every pair, patches in order.
template <class F>
void forEachPixel(int64_t batch, int64_t height, int64_t width, int64_t patch, F f) {
  int64_t e = 0;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t gy = 0; gy < height / patch; ++gy)
      for (int64_t gx = 0; gx < width / patch; ++gx)
        for (int64_t ky = 0; ky < patch; ++ky)
          for (int64_t kx = 0; kx < patch; ++kx)
            f(e++, (b * height + gy * patch + ky) * width + gx * patch + kx);
}

}  // namespace

void patchify(const float* images, float* patches, int64_t batch, int64_t height, int64_t width,
              int64_t patch) {
  forEachPixel(batch, height, width, patch,
               [&](int64_t e, int64_t pixel) { patches[e] = images[pixel]; });
}

void patchifyBackward(const float* dpatches, float* dimages, int64_t batch, int64_t height,
                      int64_t width, int64_t patch, bool accumulate) {
  forEachPixel(batch, height, width, patch, [&](int64_t e, int64_t pixel) {
    dimages[pixel] = accumulate ? float(double(dimages[pixel]) + dpatches[e]) : dpatches[e];
  });
}

}  // namespace vkgrad::ops::ref
