// CPU reference of ops/vae_loss.h, in double: per-row sums and their mean, and the gradients.
#pragma once

#include <cstdint>
#include <vector>

#include "vkgrad/ops/vae_loss.h"

namespace vkgrad::ops::ref {

// a, b: (rows, cols). Returns the row sums; *mean gets their mean.
std::vector<float> reconstructionLoss(Reconstruction kind, const float* logits,
                                      const float* targets, int64_t rows, int64_t cols,
                                      float* mean);
std::vector<float> gaussianKl(const float* mu, const float* log_sigma, int64_t rows, int64_t cols,
                              float* mean);
// The gradient of the mean times dmean, with respect to the logits / mu / log_sigma.
std::vector<float> reconstructionLossBackward(Reconstruction kind, const float* logits,
                                              const float* targets, int64_t rows, int64_t cols,
                                              float dmean);
std::vector<float> gaussianKlBackward(KlInput input, const float* mu, const float* log_sigma,
                                      int64_t rows, int64_t cols, float dmean);

}  // namespace vkgrad::ops::ref
