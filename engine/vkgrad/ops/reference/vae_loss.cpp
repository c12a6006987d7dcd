#include "vkgrad/ops/reference/vae_loss.h"

#include <algorithm>
#include <cmath>

namespace vkgrad::ops::ref {
namespace {

double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

double reconstructionTerm(Reconstruction kind, double l, double t) {
  if (kind == Reconstruction::Bce)
    return std::max(l, 0.0) - t * l + std::log1p(std::exp(-std::abs(l)));
  const double d = sigmoid(l) - t;
  return d * d;
}

double klTerm(double mu, double ls) {
  return 0.5 * (mu * mu + std::expm1(2.0 * ls)) - ls;
}

template <class Term>
std::vector<float> rowSums(const float* a, const float* b, int64_t rows, int64_t cols, float* mean,
                           Term term) {
  std::vector<float> out(static_cast<size_t>(rows));
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j)
      sum += term(double(a[r * cols + j]), double(b[r * cols + j]));
    out[size_t(r)] = float(sum);
    total += sum;
  }
  *mean = float(total / double(rows));
  return out;
}

}  // namespace

std::vector<float> reconstructionLoss(Reconstruction kind, const float* logits,
                                      const float* targets, int64_t rows, int64_t cols,
                                      float* mean) {
  return rowSums(logits, targets, rows, cols, mean,
                 [kind](double l, double t) { return reconstructionTerm(kind, l, t); });
}

std::vector<float> gaussianKl(const float* mu, const float* log_sigma, int64_t rows, int64_t cols,
                              float* mean) {
  return rowSums(mu, log_sigma, rows, cols, mean, klTerm);
}

std::vector<float> reconstructionLossBackward(Reconstruction kind, const float* logits,
                                              const float* targets, int64_t rows, int64_t cols,
                                              float dmean) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const double g = double(dmean) / double(rows);
  for (size_t i = 0; i < out.size(); ++i) {
    const double s = sigmoid(double(logits[i])), t = double(targets[i]);
    out[i] = float(g * (kind == Reconstruction::Bce ? s - t : 2.0 * (s - t) * s * (1.0 - s)));
  }
  return out;
}

std::vector<float> gaussianKlBackward(KlInput input, const float* mu, const float* log_sigma,
                                      int64_t rows, int64_t cols, float dmean) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  const double g = double(dmean) / double(rows);
  for (size_t i = 0; i < out.size(); ++i)
    out[i] =
        float(g * (input == KlInput::Mu ? double(mu[i]) : std::expm1(2.0 * double(log_sigma[i]))));
  return out;
}

}  // namespace vkgrad::ops::ref
