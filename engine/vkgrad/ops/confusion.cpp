#include "vkgrad/ops/confusion.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// One row per invocation step: C is small for a classifier (10 for Fashion-MNIST), so a row's
// scan is short, and rows are many.
constexpr uint32_t kWorkgroup = 64;

struct ConfusionPush {
  uint32_t rows, classes;
  uint32_t skip[3];  // where logits, labels and counts start in their bindings, in elements
};
static_assert(sizeof(ConfusionPush) == 20);

}  // namespace

Shape confusionShape(const Shape& logits, DType logits_dtype, const Shape& labels,
                     DType labels_dtype) {
  const std::string at = "confusion: logits " + logits.str() + ", labels " + labels.str() + ": ";
  if (!isFloat(logits_dtype)) throw ShapeError(at + "logits must be f32, f16 or bf16, got u32");
  if (labels_dtype != DType::U32) throw ShapeError(at + "labels must be u32, got f32");
  if (logits.rank() < 2 || logits.numel() == 0)
    throw ShapeError(at + "logits must be a non-empty (..., C) with at least 2 dims");
  bool same_rows = labels.rank() == logits.rank() - 1;
  for (int i = 0; same_rows && i < labels.rank(); ++i) same_rows = labels[i] == logits[i];
  if (!same_rows) throw ShapeError(at + "labels must have the shape of logits without C");
  // C * C cells indexed in 32 bits; a row index and its logits too.
  if (logits.back() >= (int64_t(1) << 16)) throw ShapeError(at + "C must be below 2^16");
  if (logits.numel() >= (int64_t(1) << 31)) throw ShapeError(at + "logits exceed 2^31 elements");
  return {logits.back(), logits.back()};
}

void confusion(vk::Recorder& rec, const TensorView& logits, const TensorView& labels,
               const TensorView& counts, Write w) {
  const char* op = "confusion";
  const Shape want = confusionShape(logits.shape, logits.dtype, labels.shape, labels.dtype);
  if (!(counts.shape == want))
    throw ShapeError(std::string(op) + ": logits " + logits.shape.str() + ": counts " +
                     counts.shape.str() + " must be " + want.str());
  checkFloat(op, "logits", logits);
  checkFits(op, "labels", labels, DType::U32);
  checkFits(op, "counts", counts, DType::U32);
  checkAlias(op, "counts", counts, "logits", logits, false);
  checkAlias(op, "counts", counts, "labels", labels, false);
  vk::Context& ctx = rec.context();
  const Bound bl = bindStorage(ctx, logits), bt = bindStorage(ctx, labels),
              bc = bindStorage(ctx, counts);
  const ConfusionPush push{
      uint32_t(logits.shape.rows()), uint32_t(want[0]), {bl.skip, bt.skip, bc.skip}};
  // The recorder puts a barrier between the fill and the kernel's atomics (it writes counts).
  if (w == Write::Overwrite) rec.fill(*counts.buffer, 0u, counts.offset, counts.bytes());
  const vk::Arg args[] = {bl.arg, bt.arg, bc.arg};
  rec.dispatchGroups(floatKernel(ctx, "confusion/count", {{"local_size_x", kWorkgroup}},
                                 {{"logits_dtype", logits.dtype}}),
                     args, &push, sizeof(push), gridGroups(rec.context(), push.rows, kWorkgroup));
}

}  // namespace vkgrad::ops
