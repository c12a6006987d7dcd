#include "vkgrad/ops/take_row.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// Both kernels' push constants; skip[i]: where binding i's view starts, in elements.
struct TakeRowPush {
  uint32_t n;      // invocations
  uint32_t rows;   // T
  uint32_t dim;    // C
  uint32_t index;  // < T
  uint32_t skip[2];
};
static_assert(sizeof(TakeRowPush) == 24);

// Checks x (B,T,C) against rows (B,C) for either direction and returns the push constants
// without n and skips.
TakeRowPush check(const char* op, const char* x_name, const TensorView& x, const char* rows_name,
                  const TensorView& rows, int64_t index) {
  const Shape want = takeRowShape(x.shape, index);
  if (!(rows.shape == want))
    throw ShapeError(std::string(op) + ": " + x_name + " " + x.shape.str() + " with index " +
                     std::to_string(index) + ": " + rows_name + " " + rows.shape.str() +
                     " must be " + want.str());
  checkFloatOperand(op, x_name, x);
  checkFloatOperand(op, rows_name, rows);
  checkAlias(op, rows_name, rows, x_name, x, false);
  return {0, uint32_t(x.shape[1]), uint32_t(x.shape[2]), uint32_t(index), {}};
}

}  // namespace

Shape takeRowShape(const Shape& x, int64_t index) {
  const std::string shapes =
      "takeRow: x " + x.str() + " with index " + std::to_string(index) + ": ";
  if (x.rank() != 3 || x.numel() == 0) throw ShapeError(shapes + "x must be a non-empty (B,T,C)");
  if (index < 0 || index >= x[1])
    throw ShapeError(shapes + "index must be in [0, " + std::to_string(x[1]) + ")");
  return {x[0], x[2]};
}

void takeRow(vk::Recorder& rec, const TensorView& x, const TensorView& out, int64_t index) {
  TakeRowPush push = check("takeRow", "x", x, "out", out, index);
  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), bo = bindStorage(ctx, out);
  push.n = uint32_t(out.shape.numel());
  push.skip[0] = bx.skip, push.skip[1] = bo.skip;
  const vk::Arg args[] = {bx.arg, bo.arg};
  const vk::Kernel& kernel =
      floatKernel(ctx, "take_row/forward", {{"local_size_x", workgroupSize(ctx)}},
                  {{"x_dtype", x.dtype}, {"out_rows_dtype", out.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
}

void takeRowBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx, int64_t index,
                     Write write) {
  // dx is the checked (B,T,C) side here, and it is what must not overlap dout.
  TakeRowPush push = check("takeRowBackward", "dx", dx, "dout", dout, index);
  vk::Context& ctx = rec.context();
  const Bound bd = bindStorage(ctx, dout), bx = bindStorage(ctx, dx);
  const bool accumulate = write == Write::Accumulate;
  // Overwrite walks all of dx to write its zeros too; Accumulate only dout's elements.
  push.n = uint32_t(accumulate ? dout.shape.numel() : dx.shape.numel());
  push.skip[0] = bd.skip, push.skip[1] = bx.skip;
  const vk::Arg args[] = {bd.arg, bx.arg};
  const vk::Kernel& kernel = floatKernel(
      ctx, "take_row/backward", {{"local_size_x", workgroupSize(ctx)}, {"kAccumulate", accumulate}},
      {{"dy_dtype", dout.dtype}, {"dx_dtype", dx.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
}

}  // namespace vkgrad::ops
