#include "common/random.h"

#include <cstdlib>

namespace vkgrad::test {

Rng::Rng() {
  if (const char* env = std::getenv("VKGRAD_TEST_SEED"); env && *env) {
    seed_ = std::strtoull(env, nullptr, 10);
  } else {
    std::random_device device;
    seed_ = (uint64_t(device()) << 32) | device();
  }
  engine_.seed(seed_);
}

std::string Rng::describe() const {
  return "seed " + std::to_string(seed_) +
         " (rerun with VKGRAD_TEST_SEED=" + std::to_string(seed_) + ")";
}

std::vector<float> Rng::uniform(size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> out(n);
  for (float& x : out) x = dist(engine_);
  return out;
}

std::vector<float> Rng::normal(size_t n, float mean, float stddev) {
  std::normal_distribution<float> dist(mean, stddev);
  std::vector<float> out(n);
  for (float& x : out) x = dist(engine_);
  return out;
}

uint32_t Rng::below(uint32_t n) {
  return std::uniform_int_distribution<uint32_t>(0, n - 1)(engine_);
}

std::vector<uint32_t> Rng::below(size_t count, uint32_t n) {
  std::vector<uint32_t> out(count);
  for (auto& v : out) v = below(n);
  return out;
}

}  // namespace vkgrad::test
