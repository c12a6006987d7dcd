// CPU reference for ops::augment: the same Philox draws (ops/reference/random.h), applied as
// the op's definition reads: mirror the image, pad it by `pad` pixels of fill on every side,
// crop the (H,W) window at (pad + dy, pad + dx) (a different route from the kernel's index
// arithmetic).
#pragma once

#include <cstdint>

#include "vkgrad/ops/reference/random.h"

namespace vkgrad::ops::ref {

// Image b's draws from stream s (ops/augment.h has the map from words to draws).
struct AugmentDraw {
  int64_t dx = 0, dy = 0;
  bool mirror = false;
};
AugmentDraw augmentDraw(const Stream& s, int64_t image, int64_t pad, bool flip);

// images, out: (B,H,W).
void augment(const Stream& s, const float* images, float* out, int64_t batch, int64_t height,
             int64_t width, int64_t pad, bool flip, float fill);

}  // namespace vkgrad::ops::ref
