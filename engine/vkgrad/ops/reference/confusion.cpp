#include "vkgrad/ops/reference/confusion.h"

#include <algorithm>
#include <cmath>

namespace vkgrad::ops::ref {

int64_t argmax(const float* row, int64_t classes) {
  int64_t best = 0;
  for (int64_t j = 0; j < classes; ++j) {
    if (std::isnan(row[j])) return j;
    if (row[j] > row[best]) best = j;
  }
  return best;
}

void confusion(const float* logits, const uint32_t* labels, uint32_t* counts, int64_t rows,
               int64_t classes, bool accumulate) {
  if (!accumulate) std::fill(counts, counts + classes * classes, 0u);
  for (int64_t r = 0; r < rows; ++r)
    if (labels[r] < classes) ++counts[labels[r] * classes + argmax(logits + r * classes, classes)];
}

}  // namespace vkgrad::ops::ref
