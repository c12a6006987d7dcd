// CPU reference for matmul: double accumulation, so it is the trusted side of a test.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// a: (M,K), b: (K,N), c: (M,N), row-major.
void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k);

// The general product of ops::matmul. a holds batch_a matrices (M,K), or (K,M) if trans_a;
// b holds batch_b matrices (K,N), or (N,K) if trans_b; batch_a and batch_b are each batch or
// 1 (broadcast). c: (batch,M,N).
struct MatmulArgs {
  int64_t m = 1, n = 1, k = 1;
  int64_t batch = 1, batch_a = 1, batch_b = 1;
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 0.0f;
};

// c = alpha·op(a)·op(b) + beta·c + bias (bias: (N) or null; c is not read if beta == 0).
void matmul(const float* a, const float* b, const float* bias, float* c, const MatmulArgs& args);
// Gradients of that product for upstream dc (batch,M,N), shaped like a, b and (N); any may be
// null. They are overwritten; a broadcast operand's gradient sums over the batch.
void matmulBackward(const float* a, const float* b, const float* dc, float* da, float* db,
                    float* dbias, const MatmulArgs& args);

}  // namespace vkgrad::ops::ref
