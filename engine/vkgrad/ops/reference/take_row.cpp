#include "vkgrad/ops/reference/take_row.h"

namespace vkgrad::ops::ref {

void takeRow(const float* x, float* out, int64_t batch, int64_t rows, int64_t dim, int64_t index) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < dim; ++c) out[b * dim + c] = x[(b * rows + index) * dim + c];
}

void takeRowBackward(const float* dout, float* dx, int64_t batch, int64_t rows, int64_t dim,
                     int64_t index, bool accumulate) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t c = 0; c < dim; ++c) {
        float& to = dx[(b * rows + t) * dim + c];
        if (t == index)
          to = accumulate ? float(double(to) + dout[b * dim + c]) : dout[b * dim + c];
        else if (!accumulate)
          to = 0.0f;
      }
}

}  // namespace vkgrad::ops::ref
