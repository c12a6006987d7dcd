#include "vkgrad/ops/reference/optimizer.h"

#include <cmath>

namespace vkgrad::ops::ref {

void sgd(std::span<double> param, std::span<const float> grad, std::span<double> velocity,
         double lr, double momentum, double weight_decay, bool nesterov) {
  for (size_t i = 0; i < param.size(); ++i) {
    const double g = double(grad[i]) + weight_decay * param[i];
    velocity[i] = momentum * velocity[i] + g;
    param[i] -= lr * (nesterov ? g + momentum * velocity[i] : velocity[i]);
  }
}

void adamw(std::span<double> param, std::span<const float> grad, std::span<double> m,
           std::span<double> v, double lr, double beta1, double beta2, double eps,
           double weight_decay, uint32_t t) {
  const double bias1 = 1.0 - std::pow(beta1, double(t));
  const double bias2 = 1.0 - std::pow(beta2, double(t));
  for (size_t i = 0; i < param.size(); ++i) {
    const double g = grad[i];
    m[i] = beta1 * m[i] + (1.0 - beta1) * g;
    v[i] = beta2 * v[i] + (1.0 - beta2) * g * g;
    param[i] = param[i] * (1.0 - lr * weight_decay) -
               lr * (m[i] / bias1) / (std::sqrt(v[i] / bias2) + eps);
  }
}

double gradNorm(const std::vector<std::vector<float>>& grads) {
  double sum = 0.0;
  for (const auto& g : grads)
    for (float x : g) sum += double(x) * double(x);
  return std::sqrt(sum);
}

}  // namespace vkgrad::ops::ref
