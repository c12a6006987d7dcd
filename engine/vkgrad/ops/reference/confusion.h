// CPU reference for the confusion matrix (ops/confusion.h): the same argmax rule (first
// maximum, a NaN beats everything) and labels >= C ignored.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// The predicted class of one row of C logits.
int64_t argmax(const float* row, int64_t classes);
// logits: (rows,C); labels: (rows); counts: (C,C), counts[label][argmax] += 1, after zeroing
// unless accumulate.
void confusion(const float* logits, const uint32_t* labels, uint32_t* counts, int64_t rows,
               int64_t classes, bool accumulate);

}  // namespace vkgrad::ops::ref
