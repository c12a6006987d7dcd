// CPU reference for matmul: double accumulation, so it is the trusted side of a test.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// a: (M,K), b: (K,N), c: (M,N), row-major.
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

}  // namespace vkgrad::ops::ref
