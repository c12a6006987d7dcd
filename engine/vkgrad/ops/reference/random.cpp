#include "vkgrad/ops/reference/random.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

namespace vkgrad::ops::ref {
namespace {

double unit(uint32_t bits) {
  return double(bits >> 8) * 0x1p-24;
}  // [0, 1)
double unitNonZero(uint32_t bits) {
  return (double(bits >> 8) + 1.0) * 0x1p-24;
}  // (0, 1]

}  // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1],
         uint32_t(p0)};
    k = {k[0] + kW0, k[1] + kW1};
  }
  return c;
}

uint32_t Stream::word(uint64_t i) const {
  return philox4x32_10({uint32_t(i / 4), stream, uint32_t(offset), uint32_t(offset >> 32)},
                       {uint32_t(seed), uint32_t(seed >> 32)})[i % 4];
}

void randomBits(const Stream& s, uint32_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = s.word(i);
}

void uniform(const Stream& s, float lo, float hi, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = float(double(lo) + (double(hi) - double(lo)) * unit(s.word(i)));
}

void normal(const Stream& s, float mean, float stddev, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    // Element i pairs words (2m, 2m+1) of its block, m = (i % 4) / 2; even i takes cos.
    const uint64_t first = i / 4 * 4 + (i % 4) / 2 * 2;
    const double r = std::sqrt(-2.0 * std::log(unitNonZero(s.word(first))));
    const double theta = std::numbers::pi * (2.0 * unit(s.word(first + 1)) - 1.0);
    const double z = r * (i % 2 == 0 ? std::cos(theta) : std::sin(theta));
    out[i] = float(double(mean) + double(stddev) * z);
  }
}

void reparameterize(const Stream& s, const float* mu, const float* log_sigma, float* z, int64_t n) {
  std::vector<float> eps(static_cast<size_t>(n));
  normal(s, 0.0f, 1.0f, eps.data(), n);
  for (int64_t i = 0; i < n; ++i)
    z[i] = float(double(mu[i]) + std::exp(double(log_sigma[i])) * double(eps[size_t(i)]));
}

void dropout(const Stream& s, float p, const float* x, float* y, int64_t n) {
  const double t = std::nearbyint(double(p) * 4294967296.0);
  const uint64_t threshold = t >= 4294967295.0 ? 0xFFFFFFFFu : uint64_t(t);
  const double scale = double(float(1.0 / (1.0 - double(p))));
  for (int64_t i = 0; i < n; ++i)
    y[i] = s.word(i) >= threshold ? float(double(x[i]) * scale) : 0.0f;
}

void categorical(const Stream& s, const float* weights, uint32_t* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* w = weights + r * cols;
    double total = 0.0;
    for (int64_t j = 0; j < cols; ++j) total += std::max(double(w[j]), 0.0);
    const double target = unit(s.word(r)) * total;
    uint32_t pick = 0;
    double sum = 0.0;
    for (int64_t j = 0; j < cols; ++j) {
      if (w[j] <= 0.0f) continue;
      sum += w[j];
      pick = uint32_t(j);
      if (sum > target) break;
    }
    out[r] = pick;
  }
}

}  // namespace vkgrad::ops::ref
