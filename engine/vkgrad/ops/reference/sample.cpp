#include "vkgrad/ops/reference/sample.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace vkgrad::ops::ref {

void topKWeights(const float* logits, float* weights, int64_t rows, int64_t cols, float temperature,
                 int64_t top_k) {
  const int64_t k = top_k == 0 ? cols : std::min(top_k, cols);
  std::vector<float> sorted;
  for (int64_t r = 0; r < rows; ++r) {
    const float* l = logits + r * cols;
    sorted.assign(l, l + cols);
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
    const float kth = sorted[size_t(k - 1)];
    const float top = *std::max_element(l, l + cols);
    for (int64_t j = 0; j < cols; ++j)
      weights[r * cols + j] =
          l[j] >= kth ? float(std::exp((double(l[j]) - top) / double(temperature))) : 0.0f;
  }
}

}  // namespace vkgrad::ops::ref
