// CPU reference for layer norm: double accumulation and a two-pass variance.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x, y: (rows, n); gamma, beta: (n); mean, rstd: (rows).
void layernorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, int64_t rows, int64_t n, float eps);

}  // namespace vkgrad::ops::ref
