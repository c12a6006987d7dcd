// Fresh random test data. The seed comes from std::random_device unless
// VKGRAD_TEST_SEED is set; describe() goes into failure messages for replay.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace vkgrad::test {

class Rng {
 public:
  Rng();
  uint64_t seed() const { return seed_; }
  std::string describe() const;  // "seed 1234 (rerun with VKGRAD_TEST_SEED=1234)"

  std::vector<float> uniform(size_t n, float lo = -1.0f, float hi = 1.0f);
  std::vector<float> normal(size_t n, float mean = 0.0f, float stddev = 1.0f);
  uint32_t below(uint32_t n);                             // uniform integer in [0, n)
  std::vector<uint32_t> below(size_t count, uint32_t n);  // ids, class targets

 private:
  uint64_t seed_;
  std::mt19937_64 engine_;
};

}  // namespace vkgrad::test
