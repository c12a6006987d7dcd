#include "vkgrad/ops/reference/prepend_token.h"

namespace vkgrad::ops::ref {

void prependToken(const float* x, const float* token, float* out, int64_t batch, int64_t rows,
                  int64_t dim) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; t <= rows; ++t)
      for (int64_t c = 0; c < dim; ++c)
        out[(b * (rows + 1) + t) * dim + c] = t == 0 ? token[c] : x[(b * rows + t - 1) * dim + c];
}

void prependTokenBackward(const float* dout, float* dx, float* dtoken, int64_t batch, int64_t rows,
                          int64_t dim, bool accumulate_dx, bool accumulate_dtoken) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t t = 0; dx && t < rows; ++t)
      for (int64_t c = 0; c < dim; ++c) {
        const float g = dout[(b * (rows + 1) + t + 1) * dim + c];
        float& to = dx[(b * rows + t) * dim + c];
        to = accumulate_dx ? float(double(to) + g) : g;
      }
  for (int64_t c = 0; dtoken && c < dim; ++c) {
    double sum = 0.0;
    for (int64_t b = 0; b < batch; ++b) sum += dout[b * (rows + 1) * dim + c];
    dtoken[c] = float(accumulate_dtoken ? double(dtoken[c]) + sum : sum);
  }
}

}  // namespace vkgrad::ops::ref
