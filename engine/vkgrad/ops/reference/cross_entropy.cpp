#include "vkgrad/ops/reference/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace vkgrad::ops::ref {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// logsumexp of one row in double; -inf for an all -inf row.
double logSumExp(const float* row, int64_t c) {
  double m = kNegInf;
  for (int64_t i = 0; i < c; ++i) m = std::max(m, double(row[i]));
  if (m == kNegInf) return kNegInf;
  double sum = 0.0;
  for (int64_t i = 0; i < c; ++i) sum += std::exp(double(row[i]) - m);
  return m + std::log(sum);
}

bool counted(uint32_t t, int64_t c, uint32_t ignore_index) {
  return t != ignore_index && int64_t(t) < c;
}

}  // namespace

double crossEntropy(const float* logits, const uint32_t* targets, float* loss_rows, int64_t rows,
                    int64_t c, uint32_t ignore_index, int64_t* count) {
  double total = 0.0;
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * c;
    double loss = 0.0;
    if (counted(targets[r], c, ignore_index)) {
      const double target = row[targets[r]];
      // A masked target has probability 0 (and -inf - -inf would be NaN).
      loss =
          target == kNegInf ? std::numeric_limits<double>::infinity() : logSumExp(row, c) - target;
      ++n;
    }
    loss_rows[r] = static_cast<float>(loss);
    total += loss;
  }
  if (count) *count = n;
  return n == 0 ? 0.0 : total / double(n);
}

void crossEntropyBackward(const float* logits, const uint32_t* targets, float dmean, float* dlogits,
                          int64_t rows, int64_t c, uint32_t ignore_index) {
  int64_t n = 0;
  for (int64_t r = 0; r < rows; ++r) n += counted(targets[r], c, ignore_index);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * c;
    float* out = dlogits + r * c;
    if (n == 0 || !counted(targets[r], c, ignore_index)) {
      std::fill(out, out + c, 0.0f);
      continue;
    }
    const double lse = logSumExp(row, c), g = double(dmean) / double(n);
    for (int64_t i = 0; i < c; ++i) {
      const double p = lse == kNegInf ? 0.0 : std::exp(double(row[i]) - lse);
      out[i] = static_cast<float>((p - (i == int64_t(targets[r]) ? 1.0 : 0.0)) * g);
    }
  }
}

}  // namespace vkgrad::ops::ref
