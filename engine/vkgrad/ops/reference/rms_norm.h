// CPU reference for RMS norm, in double.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x, y: (rows, n); gamma: (n); rstd: (rows).
void rmsNorm(const float* x, const float* gamma, float* y, float* rstd, int64_t rows, int64_t n,
             float eps);
// dx: (rows, n), dgamma: (n), overwritten (either may be null); rstd recomputed from x in
// double.
void rmsNormBackward(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma,
                     int64_t rows, int64_t n, float eps);

}  // namespace vkgrad::ops::ref
