// CPU reference for layer norm: double accumulation and a two-pass variance.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x, y: (rows, n); gamma, beta: (n); mean, rstd: (rows).
void layerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, int64_t rows, int64_t n, float eps);

// x, dy, dx: (rows, n); gamma, dgamma, dbeta: (n); mean, rstd: (rows), the saved statistics,
// or both null to recompute them from x in double (with eps), which shows how much the
// saved fp32 statistics cost. dx, dgamma, dbeta are overwritten; dgamma, dbeta may be null.
void layerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd,
                       const float* dy, float* dx, float* dgamma, float* dbeta, int64_t rows,
                       int64_t n, float eps = 0.0f);

}  // namespace vkgrad::ops::ref
