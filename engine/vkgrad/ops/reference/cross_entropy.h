// CPU reference for fused softmax + cross-entropy: double accumulation, so it is the
// trusted side of a test. Same conventions as ops/cross_entropy.h.
#pragma once

#include <cstdint>

namespace vkgrad::ops::ref {

// logits: (rows, c); targets: (rows); loss_rows: (rows). Rows whose target is ignore_index
// or >= c get loss 0 and are not counted. Returns the mean over counted rows (0 if none);
// *count (if not null) gets the number counted.
double crossEntropy(const float* logits, const uint32_t* targets, float* loss_rows, int64_t rows,
                    int64_t c, uint32_t ignore_index, int64_t* count = nullptr);
// dlogits: (rows, c) = (softmax(logits) - onehot(target)) * dmean / count, zero rows for
// ignored or bad targets, all zero when count is 0 (overwrites dlogits).
void crossEntropyBackward(const float* logits, const uint32_t* targets, float dmean, float* dlogits,
                          int64_t rows, int64_t c, uint32_t ignore_index);

}  // namespace vkgrad::ops::ref
