// CPU reference for batch norm (ops/batch_norm.h): double accumulation, two-pass variance.
// x, y, dy, dx: (n, c, s) row-major; gamma, beta, mean, rstd and the running statistics: (c).
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// Training forward: mean and rstd per channel, y; running_mean and running_var (both null to
// skip) updated with momentum and the unbiased variance.
void batchNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, float* running_mean, float* running_var, int64_t n, int64_t c,
               int64_t s, float eps, float momentum);

// Inference forward from the running statistics.
void batchNormInference(const float* x, const float* gamma, const float* beta,
                        const float* running_mean, const float* running_var, float* y, int64_t n,
                        int64_t c, int64_t s, float eps);

// Backward from the statistics given (training: the saved mean and rstd; inference: the
// running mean and variance, rstd = 1 / sqrt(var + eps)). dx, dgamma, dbeta overwritten; any
// may be null.
void batchNormBackward(const float* x, const float* gamma, const float* mean, const float* stat,
                       const float* dy, float* dx, float* dgamma, float* dbeta, int64_t n,
                       int64_t c, int64_t s, bool training, float eps);

}  // namespace vkgrad::ops::ref
