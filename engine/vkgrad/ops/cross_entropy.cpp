#include "vkgrad/ops/cross_entropy.h"

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/row_kernels.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr vk::TexelFormat kR32f = vk::TexelFormat::R32f;
// The mean runs in one workgroup (of 256 lanes where the device allows); its lanes each sum a
// strided slice of the rows.
constexpr uint32_t kMeanWorkgroup = 256;
// count is summed and stored as a float, exact below this.
constexpr int64_t kMaxRows = int64_t(1) << 24;

struct CrossEntropyPush {
  uint32_t rows, classes, ignore_index;
  // First elements inside the bindings.
  uint32_t logits_skip, targets_skip, losses_skip, saved_skip, status_skip;
};
static_assert(sizeof(CrossEntropyPush) == 32);

struct CrossEntropyMeanPush {
  uint32_t rows, classes, ignore_index;
  uint32_t losses_skip, targets_skip, mean_skip, saved_skip;
};
static_assert(sizeof(CrossEntropyMeanPush) == 28);

struct CrossEntropyBackwardPush {
  uint32_t rows, classes, ignore_index;
  uint32_t logits_skip, targets_skip, saved_skip, dmean_skip, dlogits_skip;
};
static_assert(sizeof(CrossEntropyBackwardPush) == 32);

// The targets' binding: storage, or for a kernel's .sb4 build an R32UI texel view (the same
// skip), refused naming maxTexelBufferElements where it does not fit one.
Bound bindTargets(const vk::Context& ctx, const TensorView& targets, bool four, const char* op) {
  if (!four) return bindStorage(ctx, targets);
  if (!texelFits(ctx, targets, vk::TexelFormat::R32u))
    throw Error(texelViewRefusal(ctx, op, "targets", targets));
  return bindTexel(ctx, targets, vk::TexelFormat::R32u);
}

// logits (..., C) and targets (...), the dims before C; returns the row count.
int64_t checkLogitsAndTargets(const char* op, const TensorView& logits, const TensorView& targets) {
  crossEntropyShape(logits.shape, targets.shape, targets.dtype, op);
  return logits.shape.rows();
}

void checkSaved(const char* op, const std::string& shapes, const TensorView& saved, int64_t rows) {
  if (saved.shape.numel() < crossEntropySavedSize(rows))
    throw ShapeError(std::string(op) + ": " + shapes + ": saved must hold 2 * rows + 1 = " +
                     std::to_string(crossEntropySavedSize(rows)) + " floats");
}

void checkScalar(const char* op, const std::string& shapes, const char* name, const TensorView& t) {
  if (t.shape.numel() != 1)
    throw ShapeError(std::string(op) + ": " + shapes + ": " + name + " must hold one float");
}

}  // namespace

Shape crossEntropyShape(const Shape& logits, const Shape& targets, DType targets_dtype,
                        const char* op) {
  const std::string at =
      std::string(op) + ": logits " + logits.str() + ", targets " + targets.str() + ": ";
  if (logits.rank() < 1 || logits.numel() == 0)
    throw ShapeError(at + "logits must be a non-empty (..., C)");
  bool same_rows =
      targets.rank() == std::max(1, logits.rank() - 1) && targets.numel() == logits.rows();
  for (int i = 0; same_rows && i + 1 < logits.rank(); ++i) same_rows = targets[i] == logits[i];
  if (!same_rows) throw ShapeError(at + "targets must have the shape of logits without C");
  if (targets_dtype != DType::U32)
    throw ShapeError(at + "targets must be u32, got " + dtypeName(targets_dtype));
  if (logits.back() >= int64_t(UINT32_MAX)) throw ShapeError(at + "C must be below 2^32 - 1");
  if (logits.rows() >= kMaxRows) throw ShapeError(at + "more than 2^24 rows");
  return targets;
}

void crossEntropy(vk::Recorder& rec, const TensorView& logits, const TensorView& targets,
                  const TensorView& loss_rows, const TensorView& loss_mean, const TensorView& saved,
                  const TensorView& status, uint32_t ignore_index, SoftmaxVariant variant) {
  const char* op = "crossEntropy";
  vk::Context& ctx = rec.context();
  const std::string shapes = "logits " + logits.shape.str() + ", targets " + targets.shape.str() +
                             ", loss_rows " + loss_rows.shape.str();
  const int64_t rows = checkLogitsAndTargets(op, logits, targets);
  if (!(loss_rows.shape == targets.shape))
    throw ShapeError(std::string(op) + ": " + shapes + ": loss_rows must be shaped like targets");
  checkScalar(op, shapes, "loss_mean", loss_mean);
  checkSaved(op, shapes, saved, rows);
  if (status.shape.numel() < 2)
    throw ShapeError(std::string(op) + ": status " + status.shape.str() + " must hold 2 u32 words");
  checkRowFloatOperand(op, "logits", ctx, logits);
  checkRowOperand(op, "targets", ctx, targets, DType::U32);
  checkRowFloatOperand(op, "loss_rows", ctx, loss_rows);
  checkRowFloatOperand(op, "loss_mean", ctx, loss_mean);
  checkRowFloatOperand(op, "saved", ctx, saved);
  checkRowOperand(op, "status", ctx, status, DType::U32);
  const std::pair<const char*, const TensorView*> outs[] = {
      {"loss_rows", &loss_rows}, {"loss_mean", &loss_mean}, {"saved", &saved}, {"status", &status}};
  for (size_t i = 0; i < std::size(outs); ++i) {
    checkAlias(op, outs[i].first, *outs[i].second, "logits", logits, false);
    checkAlias(op, outs[i].first, *outs[i].second, "targets", targets, false);
    for (size_t j = i + 1; j < std::size(outs); ++j)
      checkAlias(op, outs[i].first, *outs[i].second, outs[j].first, *outs[j].second, false);
  }
  const uint32_t classes = uint32_t(logits.shape.back());
  const SoftmaxLayout l =
      softmaxLayout(op, ctx, variant, uint64_t(rows), classes, texelFits(ctx, logits, kR32f));
  const RowInput bl = bindRowInput(ctx, logits, l.texel);
  // logits, targets, losses, saved and status: within 4 storage buffers the ".sb4" build reads
  // the targets through a texel view.
  const bool four = fewerStorageBuffers(ctx, 5);
  const Bound bt = bindTargets(ctx, targets, four, op), bloss = bindStorage(ctx, loss_rows),
              bsaved = bindStorage(ctx, saved), bstatus = bindStorage(ctx, status),
              bmean = bindStorage(ctx, loss_mean);

  const CrossEntropyPush push{uint32_t(rows), classes,    ignore_index, bl.skip,
                              bt.skip,        bloss.skip, bsaved.skip,  bstatus.skip};
  const vk::Arg args[] = {bl.storage, bl.texel, bt.arg, bloss.arg, bsaved.arg, bstatus.arg};
  const vk::Kernel& forward =
      floatKernel(ctx, four ? "cross_entropy/forward.sb4" : "cross_entropy/forward", rowsSpec(l),
                  {{"logits_dtype", logits.dtype},
                   {"losses_dtype", loss_rows.dtype},
                   {"saved_dtype", saved.dtype}});
  rec.dispatchGroups(forward, args, &push, sizeof(push), l.groups);

  const CrossEntropyMeanPush mean_push{uint32_t(rows), classes,    ignore_index, bloss.skip,
                                       bt.skip,        bmean.skip, bsaved.skip};
  const vk::Arg mean_args[] = {bloss.arg, bt.arg, bmean.arg, bsaved.arg};
  const vk::Kernel& mean =
      floatKernel(ctx, "cross_entropy/mean", {{"local_size_x", workgroupSize(ctx, kMeanWorkgroup)}},
                  {{"losses_dtype", loss_rows.dtype},
                   {"mean_dtype", loss_mean.dtype},
                   {"saved_dtype", saved.dtype}});
  rec.dispatchGroups(mean, mean_args, &mean_push, sizeof(mean_push), 1);
}

void crossEntropyBackward(vk::Recorder& rec, const TensorView& logits, const TensorView& targets,
                          const TensorView& saved, const TensorView& dmean,
                          const TensorView& dlogits, uint32_t ignore_index, Write w,
                          SoftmaxVariant variant) {
  const char* op = "crossEntropyBackward";
  vk::Context& ctx = rec.context();
  const std::string shapes = "logits " + logits.shape.str() + ", targets " + targets.shape.str() +
                             ", dlogits " + dlogits.shape.str();
  const int64_t rows = checkLogitsAndTargets(op, logits, targets);
  checkRowShapes(op, shapes, "logits", logits, "dlogits", dlogits);
  checkSaved(op, shapes, saved, rows);
  checkScalar(op, shapes, "dmean", dmean);
  checkRowFloatOperand(op, "logits", ctx, logits);
  checkRowOperand(op, "targets", ctx, targets, DType::U32);
  checkRowFloatOperand(op, "saved", ctx, saved);
  checkRowFloatOperand(op, "dmean", ctx, dmean);
  checkRowFloatOperand(op, "dlogits", ctx, dlogits);
  checkInPlaceDtype(op, "dlogits", dlogits, "logits", logits);
  checkAlias(op, "dlogits", dlogits, "logits", logits, true);
  checkAlias(op, "dlogits", dlogits, "targets", targets, false);
  checkAlias(op, "dlogits", dlogits, "saved", saved, false);
  checkAlias(op, "dlogits", dlogits, "dmean", dmean, false);
  const uint32_t classes = uint32_t(logits.shape.back());
  const SoftmaxLayout l =
      softmaxLayout(op, ctx, variant, uint64_t(rows), classes, texelFits(ctx, logits, kR32f));
  const RowInput bl = bindRowInput(ctx, logits, l.texel);
  // logits, targets, saved, dmean and dlogits: as the forward.
  const bool four = fewerStorageBuffers(ctx, 5);
  const Bound bt = bindTargets(ctx, targets, four, op), bsaved = bindStorage(ctx, saved),
              bdmean = bindStorage(ctx, dmean), bdl = bindStorage(ctx, dlogits);
  const CrossEntropyBackwardPush push{uint32_t(rows), classes,     ignore_index, bl.skip,
                                      bt.skip,        bsaved.skip, bdmean.skip,  bdl.skip};
  const vk::Arg args[] = {bl.storage, bl.texel, bt.arg, bsaved.arg, bdmean.arg, bdl.arg};
  vk::SpecConstants spec = rowsSpec(l);
  spec.push_back({"kAccumulate", w == Write::Accumulate});
  const vk::Kernel& kernel =
      floatKernel(ctx, four ? "cross_entropy/backward.sb4" : "cross_entropy/backward", spec,
                  {{"logits_dtype", logits.dtype},
                   {"saved_dtype", saved.dtype},
                   {"dmean_dtype", dmean.dtype},
                   {"dlogits_dtype", dlogits.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push), l.groups);
}

}  // namespace vkgrad::ops
