#include "vkgrad/ops/reference/batch_norm.h"

#include <cmath>
#include <vector>

namespace vkgrad::ops::ref {
namespace {

// Element i (0 <= i < n*s) of channel ch.
int64_t at(int64_t ch, int64_t i, int64_t c, int64_t s) {
  return ((i / s) * c + ch) * s + i % s;
}

}  // namespace

void batchNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean,
               float* rstd, float* running_mean, float* running_var, int64_t n, int64_t c,
               int64_t s, float eps, float momentum) {
  const int64_t m = n * s;
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0.0;
    for (int64_t i = 0; i < m; ++i) sum += x[at(ch, i, c, s)];
    const double mu = sum / double(m);
    double squares = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      const double d = x[at(ch, i, c, s)] - mu;
      squares += d * d;
    }
    const double var = squares / double(m);
    const double r = 1.0 / std::sqrt(var + double(eps));
    mean[ch] = float(mu);
    rstd[ch] = float(r);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t e = at(ch, i, c, s);
      y[e] = float((x[e] - mu) * r * gamma[ch] + beta[ch]);
    }
    if (running_mean) {
      running_mean[ch] = float((1.0 - momentum) * running_mean[ch] + double(momentum) * mu);
      running_var[ch] = float((1.0 - momentum) * running_var[ch] +
                              double(momentum) * var * double(m) / double(m - 1));
    }
  }
}

void batchNormInference(const float* x, const float* gamma, const float* beta,
                        const float* running_mean, const float* running_var, float* y, int64_t n,
                        int64_t c, int64_t s, float eps) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const double r = 1.0 / std::sqrt(double(running_var[ch]) + double(eps));
    for (int64_t i = 0; i < n * s; ++i) {
      const int64_t e = at(ch, i, c, s);
      y[e] = float((double(x[e]) - running_mean[ch]) * r * gamma[ch] + beta[ch]);
    }
  }
}

void batchNormBackward(const float* x, const float* gamma, const float* mean, const float* stat,
                       const float* dy, float* dx, float* dgamma, float* dbeta, int64_t n,
                       int64_t c, int64_t s, bool training, float eps) {
  const int64_t m = n * s;
  for (int64_t ch = 0; ch < c; ++ch) {
    const double r = training ? double(stat[ch]) : 1.0 / std::sqrt(double(stat[ch]) + double(eps));
    double sum_dy = 0.0, sum_dyx = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t e = at(ch, i, c, s);
      sum_dy += dy[e];
      sum_dyx += double(dy[e]) * (double(x[e]) - mean[ch]) * r;
    }
    if (dgamma) dgamma[ch] = float(sum_dyx);
    if (dbeta) dbeta[ch] = float(sum_dy);
    if (!dx) continue;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t e = at(ch, i, c, s);
      const double xhat = (double(x[e]) - mean[ch]) * r;
      const double g = double(dy[e]);
      dx[e] = float(gamma[ch] * r * (training ? g - (sum_dy + xhat * sum_dyx) / double(m) : g));
    }
  }
}

}  // namespace vkgrad::ops::ref
