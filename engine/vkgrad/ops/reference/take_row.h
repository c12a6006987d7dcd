// CPU reference for ops::takeRow and its backward.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// x: (B,T,C); out: (B,C) = x[:, index, :].
void takeRow(const float* x, float* out, int64_t batch, int64_t rows, int64_t dim, int64_t index);
// dout: (B,C); dx: (B,T,C): overwritten (zeros outside row index), or dout added into row
// index when accumulate.
void takeRowBackward(const float* dout, float* dx, int64_t batch, int64_t rows, int64_t dim,
                     int64_t index, bool accumulate);

}  // namespace vkgrad::ops::ref
