// CPU reference for ops::prependToken and its backward (dtoken summed in double).
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x: (B,T,C); token: (C); out: (B,T+1,C).
void prependToken(const float* x, const float* token, float* out, int64_t batch, int64_t rows,
                  int64_t dim);
// dout: (B,T+1,C); dx: (B,T,C) and dtoken: (C), each overwritten or added to; either may be
// null.
void prependTokenBackward(const float* dout, float* dx, float* dtoken, int64_t batch, int64_t rows,
                          int64_t dim, bool accumulate_dx, bool accumulate_dtoken);

}  // namespace vkgrad::ops::ref
