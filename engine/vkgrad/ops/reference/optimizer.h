// CPU reference for the optimizers and the global gradient norm, in double. The
// optimizer state (params, moments) is carried in double across steps, so a multi-step
// test measures how far the device's fp32 trajectory drifts from the exact one.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace vkgrad::ops::ref {

// One SGD step; see ops/optimizer.h for the convention.
void sgd(std::span<double> param, std::span<const float> grad, std::span<double> velocity,
         double lr, double momentum, double weight_decay, bool nesterov);

// One AdamW step number t (>= 1); see ops/optimizer.h.
void adamw(std::span<double> param, std::span<const float> grad, std::span<double> m,
           std::span<double> v, double lr, double beta1, double beta2, double eps,
           double weight_decay, uint32_t t);

// sqrt of the sum of squares of every element of every tensor.
double gradNorm(const std::vector<std::vector<float>>& grads);

}  // namespace vkgrad::ops::ref
