#include "ops/reference/matmul.h"

#include <algorithm>
#include <vector>

namespace vkgrad::ops::ref {

void matmul(const float* a, const float* b, float* c, int64_t m, int64_t n, int64_t k) {
  std::vector<double> row(n);
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double aip = a[i * k + p];
      const float* brow = b + p * n;
      for (int64_t j = 0; j < n; ++j) row[j] += aip * brow[j];
    }
    for (int64_t j = 0; j < n; ++j) c[i * n + j] = static_cast<float>(row[j]);
  }
}

}  // namespace vkgrad::ops::ref
