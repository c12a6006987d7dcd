// CPU reference of the random ops: the same Philox 4x32-10 stream, bit for bit, and the
// same maps from bits to values (in double where the kernel does float math).
#pragma once

#include <array>
#include <cstdint>

namespace vkgrad::ops::ref {

// One Philox 4x32-10 block (Random123's philox4x32_R with R = 10).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

// Where a draw comes from: see engine/vkgrad/ops/random.h for the stream layout.
struct Stream {
  uint64_t seed = 0, offset = 0;
  uint32_t stream = 0;
  uint32_t word(uint64_t i) const;  // element i of the stream
};

void randomBits(const Stream& s, uint32_t* out, int64_t n);
void uniform(const Stream& s, float lo, float hi, float* out, int64_t n);
void normal(const Stream& s, float mean, float stddev, float* out, int64_t n);
// z = mu + exp(log_sigma) * eps, eps = normal(s, 0, 1) element-wise.
void reparameterize(const Stream& s, const float* mu, const float* log_sigma, float* z, int64_t n);
// y = x * mask / (1 - p); keep iff word >= round(p * 2^32).
void dropout(const Stream& s, float p, const float* x, float* y, int64_t n);
// weights: (rows, cols); out: (rows).
void categorical(const Stream& s, const float* weights, uint32_t* out, int64_t rows, int64_t cols);

}  // namespace vkgrad::ops::ref
