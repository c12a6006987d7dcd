// Fused softmax + cross-entropy over class logits with integer targets: the loss of each
// row, their mean, and the gradient of the mean with respect to the logits, computed from
// the logits and a saved log-sum-exp; the probabilities are never materialised.
//
// Targets are u32 class ids. A row whose target is ignore_index contributes nothing: loss 0,
// not counted in the mean, zero gradient. A target that is >= C (and not ignore_index) is a
// bug in the data that the host cannot see without a readback, so, as in ops/gather.h:
//  - kernels never read or write out of bounds for it; its row is treated as ignored;
//  - crossEntropy records it in a status buffer the caller owns: 2 u32 words
//      status[0] |= kCrossEntropyBadTarget   flags; 0 means every target so far was valid
//      status[1]  = max(status[1], target)   the largest bad target seen
//    Zero it once (e.g. rec.fill) and read it back whenever convenient.
#pragma once

#include <cstdint>

#include "vkgrad/ops/softmax.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// Bit of status[0] set by crossEntropy when a target is >= C and not ignore_index.
constexpr uint32_t kCrossEntropyBadTarget = 1u << 0;
// The default ignore_index: no class id can be this large (C < 2^32 - 1 is checked), so it
// ignores nothing but targets equal to it, which are ignored rather than flagged.
constexpr uint32_t kCrossEntropyNoIgnore = UINT32_MAX;

// Elements of the saved buffer for `rows` rows: per row its max logit m and
// log(sum(exp(logits - m))) (kept apart for precision: logsumexp = their sum), then the
// number of counted rows (as a float; rows < 2^24 is checked).
inline int64_t crossEntropySavedSize(int64_t rows) {
  return 2 * rows + 1;
}

// The shape rule of crossEntropy, Vulkan-free (the graph builder uses it too): logits a
// non-empty (..., C), targets u32 shaped like logits without C (a (C) row takes (1)), at most
// 2^24 rows. Returns the shape of the row losses (targets'). Throws ShapeError
// "crossEntropy: logits (4,7), targets (5): targets must have the shape of logits without C".
Shape crossEntropyShape(const Shape& logits, const Shape& targets, DType targets_dtype = DType::U32,
                        const char* op = "crossEntropy");

// logits: (..., C); targets: (...) u32, logits' shape without C; loss_rows: targets' shape;
// loss_mean: (1); saved: (>= crossEntropySavedSize(rows)); status: (>= 2) u32. The float
// tensors may each be f32, f16 or bf16 as their views say (16-bit ones need the device's
// 16-bit storage; say bf16 logits with f32 losses); the arithmetic is f32 and a 16-bit store
// rounds once. A 16-bit saved rounds m, the log-sum and count (exact up to 2048 rows in f16,
// 256 in bf16), and the backward's probabilities carry that rounding (exp of ulp(m)): keep
// saved f32 unless memory says otherwise.
//   loss_rows[r] = logsumexp(logits[r, :]) - logits[r, t]   (0 for ignored or bad targets)
//   loss_mean    = sum(loss_rows) / count, count = rows with a valid, non-ignored target;
//                  0 (not NaN) when every row is ignored.
// Stable for any finite logits (the row max is subtracted). -inf logits are masked classes:
// a target whose logit is -inf (including every target of an all -inf row) has loss +inf,
// and then the mean is +inf; never NaN from finite or -inf logits.
// Deterministic (fixed-order sums, no float atomics). Two dispatches: rows, then the mean.
// Throws ShapeError naming the shapes before recording anything.
void crossEntropy(vk::Recorder& rec, const TensorView& logits, const TensorView& targets,
                  const TensorView& loss_rows, const TensorView& loss_mean, const TensorView& saved,
                  const TensorView& status, uint32_t ignore_index = kCrossEntropyNoIgnore,
                  SoftmaxVariant variant = SoftmaxVariant::Auto);

// logits, targets, saved: as given to (and written by) crossEntropy; dmean: (1) upstream
// gradient of loss_mean, read on the device so a recorded step can replay; dlogits: like
// logits. dlogits (= or +=) (softmax(logits) - onehot(target)) * dmean / count, zero rows
// for ignored or bad targets (only crossEntropy flags those), all zero when count is 0.
// Finite for any finite or -inf logits. dlogits may be exactly logits (of its dtype); other
// overlaps throw. Float tensors in any format, as for crossEntropy.
void crossEntropyBackward(vk::Recorder& rec, const TensorView& logits, const TensorView& targets,
                          const TensorView& saved, const TensorView& dmean,
                          const TensorView& dlogits, uint32_t ignore_index = kCrossEntropyNoIgnore,
                          Write w = Write::Overwrite,
                          SoftmaxVariant variant = SoftmaxVariant::Auto);

}  // namespace vkgrad::ops
