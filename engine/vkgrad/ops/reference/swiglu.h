// CPU reference for SwiGLU, in double.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// gate, up, y: (n) each.
void swiglu(const float* gate, const float* up, float* y, int64_t n);
// dgate, dup: (n), overwritten.
void swigluBackward(const float* gate, const float* up, const float* dy, float* dgate, float* dup,
                    int64_t n);

}  // namespace vkgrad::ops::ref
