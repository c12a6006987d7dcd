#include "vkgrad/ops/vae_loss.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/reduce.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr uint32_t kRowWorkgroup = 64;  // lanes per row sum
constexpr int64_t kMaxRows = int64_t(1) << 24;

// The KIND constants of shaders/vae_loss/.
constexpr uint32_t kBce = 0, kMse = 1, kKl = 2, kKlLogSigma = 3;

struct RowsPush {
  uint32_t rows, cols, a_skip, b_skip, rows_skip;
};
static_assert(sizeof(RowsPush) == 20);

struct BackwardPush {
  uint32_t n, rows, a_skip, b_skip, dmean_skip, out_skip;
};
static_assert(sizeof(BackwardPush) == 24);

uint32_t reconstructionKind(Reconstruction kind) {
  return kind == Reconstruction::Bce ? kBce : kMse;
}

void checkScalar(const char* op, const char* name, const TensorView& t, bool any_float) {
  if (t.shape.numel() != 1)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " must hold one float");
  if (any_float)
    checkFloatOperand(op, name, t);
  else
    checkOperand(op, name, t);
}

// Row sums of term(kind, a, b) into rows, then their mean into mean.
void recordRows(vk::Recorder& rec, const char* op, uint32_t kind, const char* a_name,
                const TensorView& a, const char* b_name, const TensorView& b,
                const TensorView& rows, const TensorView& mean) {
  const Shape rows_shape = rowLossShape(op, a_name, a.shape, b_name, b.shape);
  if (rows.shape.numel() != rows_shape.numel())
    throw ShapeError(std::string(op) + ": rows " + rows.shape.str() + " must hold " +
                     std::to_string(rows_shape.numel()) + " floats, one per row of " + a_name +
                     " " + a.shape.str());
  // The losses stay f32 (meanRows reads rows as f32); the kernel follows rows' format.
  checkScalar(op, "mean", mean, false);
  checkFloatOperand(op, a_name, a);
  checkFloatOperand(op, b_name, b);
  checkOperand(op, "rows", rows);
  checkAlias(op, "rows", rows, a_name, a, false);
  checkAlias(op, "rows", rows, b_name, b, false);
  checkAlias(op, "mean", mean, "rows", rows, false);
  vk::Context& ctx = rec.context();
  const Bound ba = bindStorage(ctx, a), bb = bindStorage(ctx, b), br = bindStorage(ctx, rows);
  const int64_t n_rows = rows_shape[0];
  const RowsPush push{uint32_t(n_rows), uint32_t(a.shape.numel() / n_rows), ba.skip, bb.skip,
                      br.skip};
  const vk::Arg args[] = {ba.arg, bb.arg, br.arg};
  rec.dispatchGroups(
      floatKernel(ctx, "vae_loss/rows", {{"local_size_x", kRowWorkgroup}, {"KIND", kind}},
                  {{"a_dtype", a.dtype}, {"b_dtype", b.dtype}, {"rows_out_dtype", rows.dtype}}),
      args, &push, sizeof(push),
      gridGroups(rec.context(), uint64_t(n_rows) * kRowWorkgroup, kRowWorkgroup));
  TensorView column = rows;
  column.shape = {n_rows, 1};
  meanRows(rec, column, mean);
}

void recordBackward(vk::Recorder& rec, const char* op, uint32_t kind, const char* a_name,
                    const TensorView& a, const char* b_name, const TensorView& b,
                    const TensorView& dmean, const char* out_name, const TensorView& out, Write w) {
  const Shape rows_shape = rowLossShape(op, a_name, a.shape, b_name, b.shape);
  if (!(out.shape == a.shape))
    throw ShapeError(std::string(op) + ": " + out_name + " " + out.shape.str() +
                     " must have the shape of " + a_name + " " + a.shape.str());
  checkScalar(op, "dmean", dmean, true);
  checkFloatOperand(op, a_name, a);
  checkFloatOperand(op, b_name, b);
  checkFloatOperand(op, out_name, out);
  if ((overlaps(out, a) && out.dtype != a.dtype) || (overlaps(out, b) && out.dtype != b.dtype))
    throw ShapeError(std::string(op) + ": " + out_name + " in place of an input needs its dtype");
  checkAlias(op, out_name, out, a_name, a, true);
  checkAlias(op, out_name, out, b_name, b, true);
  checkAlias(op, out_name, out, "dmean", dmean, false);
  vk::Context& ctx = rec.context();
  const Bound ba = bindStorage(ctx, a), bb = bindStorage(ctx, b), bd = bindStorage(ctx, dmean),
              bo = bindStorage(ctx, out);
  const uint64_t n = uint64_t(a.shape.numel());
  const BackwardPush push{uint32_t(n), uint32_t(rows_shape[0]), ba.skip, bb.skip, bd.skip, bo.skip};
  const vk::Arg args[] = {ba.arg, bb.arg, bd.arg, bo.arg};
  rec.dispatchGroups(floatKernel(ctx, "vae_loss/backward",
                                 {{"local_size_x", workgroupSize(ctx)},
                                  {"KIND", kind},
                                  {"kAccumulate", w == Write::Accumulate}},
                                 {{"a_dtype", a.dtype},
                                  {"b_dtype", b.dtype},
                                  {"dmean_dtype", dmean.dtype},
                                  {"out_values_dtype", out.dtype}}),
                     args, &push, sizeof(push),
                     gridGroups(rec.context(), n, workgroupSize(rec.context())));
}

}  // namespace

Shape rowLossShape(const char* op, const char* a_name, const Shape& a, const char* b_name,
                   const Shape& b) {
  const std::string at =
      std::string(op) + ": " + a_name + " " + a.str() + ", " + b_name + " " + b.str() + ": ";
  if (!(a == b)) throw ShapeError(at + a_name + " and " + b_name + " must have the same shape");
  if (a.rank() < 1 || a.numel() == 0) throw ShapeError(at + "must be non-empty (B, ...)");
  if (a[0] >= kMaxRows) throw ShapeError(at + "more than 2^24 rows");
  if (a.numel() >= (int64_t(1) << 31)) throw ShapeError(at + "more than 2^31 elements");
  return {a[0]};
}

void reconstructionLoss(vk::Recorder& rec, Reconstruction kind, const TensorView& logits,
                        const TensorView& targets, const TensorView& rows, const TensorView& mean) {
  recordRows(rec, "reconstructionLoss", reconstructionKind(kind), "logits", logits, "targets",
             targets, rows, mean);
}

void reconstructionLossBackward(vk::Recorder& rec, Reconstruction kind, const TensorView& logits,
                                const TensorView& targets, const TensorView& dmean,
                                const TensorView& dlogits, Write w) {
  recordBackward(rec, "reconstructionLossBackward", reconstructionKind(kind), "logits", logits,
                 "targets", targets, dmean, "dlogits", dlogits, w);
}

void gaussianKl(vk::Recorder& rec, const TensorView& mu, const TensorView& log_sigma,
                const TensorView& rows, const TensorView& mean) {
  recordRows(rec, "gaussianKl", kKl, "mu", mu, "log_sigma", log_sigma, rows, mean);
}

void gaussianKlBackward(vk::Recorder& rec, KlInput input, const TensorView& mu,
                        const TensorView& log_sigma, const TensorView& dmean,
                        const TensorView& grad, Write w) {
  recordBackward(rec, "gaussianKlBackward", input == KlInput::Mu ? kKl : kKlLogSigma, "mu", mu,
                 "log_sigma", log_sigma, dmean, input == KlInput::Mu ? "dmu" : "dlog_sigma", grad,
                 w);
}

}  // namespace vkgrad::ops
