// CPU reference for pad (ops/pad.h), on x seen as (b, h, w).
#pragma once

#include <cstdint>

#include "vkgrad/ops/pad.h"

namespace vkgrad::ops::ref {

// y: (b, h + top + bottom, w + left + right).
void pad(const float* x, float* y, int64_t b, int64_t h, int64_t w, const Padding& padding);
// dx (=|+=) the sum over the outputs each element reached, added in double, rounded once.
void padBackward(const float* dy, float* dx, int64_t b, int64_t h, int64_t w,
                 const Padding& padding, bool accumulate);

}  // namespace vkgrad::ops::ref
