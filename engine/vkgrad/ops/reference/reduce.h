// CPU reference for the reductions, accumulating in double, so it is the trusted side of a
// test. x (and y) seen as (outer, kept, inner) as in ops/reduce.h.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// out[m] = alpha * sum over o, k of x[o][m][k] (* y[o][m][k] when y is not null).
void sumOverKeptAxis(const float* x, const float* y, float* out, int64_t outer, int64_t kept,
               int64_t inner, double alpha);

}  // namespace vkgrad::ops::ref
