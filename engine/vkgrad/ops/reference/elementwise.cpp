#include "vkgrad/ops/reference/elementwise.h"

#include <vector>

namespace vkgrad::ops::ref {

void binary(BinaryKind kind, const float* a, const float* b, float* out, int64_t outer,
            int64_t kept, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t m = 0; m < kept; ++m)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = (o * kept + m) * inner + k;
        const double x = a[i], y = b[m];
        out[i] = float(kind == BinaryKind::Add ? x + y : kind == BinaryKind::Sub ? x - y : x * y);
      }
}

void binaryBackward(BinaryKind kind, const float* a, const float* b, const float* dout, float* da,
                    float* db, int64_t outer, int64_t kept, int64_t inner) {
  std::vector<double> sum(kept, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t m = 0; m < kept; ++m)
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t i = (o * kept + m) * inner + k;
        const double g = dout[i];
        if (kind == BinaryKind::Mul) {
          da[i] = float(g * b[m]);
          sum[m] += g * a[i];
        } else {
          da[i] = float(g);
          sum[m] += kind == BinaryKind::Add ? g : -g;
        }
      }
  for (int64_t m = 0; m < kept; ++m) db[m] = float(sum[m]);
}

}  // namespace vkgrad::ops::ref
