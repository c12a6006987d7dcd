#include "vkgrad/ops/prepend_token.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// Both kernels' push constants; skip[i]: where binding i's view starts, in elements.
struct PrependTokenPush {
  uint32_t n;      // invocations
  uint32_t batch;  // B
  uint32_t rows;   // T
  uint32_t dim;    // C
  uint32_t skip[3];
};
static_assert(sizeof(PrependTokenPush) == 28);

std::string describe(const char* op, const char* x_name, const Shape& x, const char* token_name,
                     const Shape& token, const char* out_name, const Shape& out) {
  return std::string(op) + ": " + x_name + " " + x.str() + ", " + token_name + " " + token.str() +
         ", " + out_name + " " + out.str();
}

}  // namespace

Shape prependTokenShape(const Shape& x, const Shape& token) {
  const std::string shapes = "prependToken: x " + x.str() + ", token " + token.str() + ": ";
  if (x.rank() != 3 || x.numel() == 0) throw ShapeError(shapes + "x must be a non-empty (B,T,C)");
  if (token.rank() != 1 || token[0] != x[2])
    throw ShapeError(shapes + "token must be (C) = (" + std::to_string(x[2]) + ")");
  return {x[0], x[1] + 1, x[2]};
}

void prependToken(vk::Recorder& rec, const TensorView& x, const TensorView& token,
                  const TensorView& out) {
  const char* op = "prependToken";
  const Shape want = prependTokenShape(x.shape, token.shape);
  if (!(out.shape == want))
    throw ShapeError(describe(op, "x", x.shape, "token", token.shape, "out", out.shape) +
                     ": out must be " + want.str());
  checkFloatOperand(op, "x", x);
  checkFloatOperand(op, "token", token);
  checkFloatOperand(op, "out", out);
  checkAlias(op, "out", out, "x", x, false);
  checkAlias(op, "out", out, "token", token, false);

  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), bt = bindStorage(ctx, token), bo = bindStorage(ctx, out);
  const PrependTokenPush push{uint32_t(out.shape.numel()),
                              uint32_t(x.shape[0]),
                              uint32_t(x.shape[1]),
                              uint32_t(x.shape[2]),
                              {bx.skip, bt.skip, bo.skip}};
  const vk::Arg args[] = {bx.arg, bt.arg, bo.arg};
  const vk::Kernel& kernel = floatKernel(
      ctx, "prepend_token/forward", {{"local_size_x", workgroupSize(ctx)}},
      {{"x_dtype", x.dtype}, {"token_dtype", token.dtype}, {"out_rows_dtype", out.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
}

// One kernel for both gradients rather than a copy and a column sum. lavapipe, T = 49,
// C = 64, 100 calls in one command buffer, wall clock per call with the validation layer on:
//   B      one dispatch   two dispatches (dx alone, then dtoken alone)
//   16        363 us        391 us
//   64       1290 us       1267 us
//   256      5147 us       5064 us
// Equal within noise, so one dispatch (fewer to record and order). The sums sat inside the
// copy loop at first and that was ~25% slower than two dispatches: they run before it now.
void prependTokenBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                          const TensorView& dtoken, Write dx_write, Write dtoken_write) {
  const char* op = "prependTokenBackward";
  const bool want_dx = dx.buffer != nullptr, want_token = dtoken.buffer != nullptr;
  const std::string shapes =
      describe(op, "dx", dx.shape, "dtoken", dtoken.shape, "dout", dout.shape);
  if (!want_dx && !want_token) throw ShapeError(shapes + ": neither dx nor dtoken is given");
  if (dout.shape.rank() != 3 || dout.shape[1] < 2 || dout.shape.numel() == 0)
    throw ShapeError(shapes + ": dout must be a non-empty (B,T+1,C) with T >= 1");
  const Shape x_shape{dout.shape[0], dout.shape[1] - 1, dout.shape[2]};
  if (want_dx && !(dx.shape == x_shape)) throw ShapeError(shapes + ": dx must be " + x_shape.str());
  if (want_token && !(dtoken.shape == Shape{dout.shape[2]}))
    throw ShapeError(shapes + ": dtoken must be (" + std::to_string(dout.shape[2]) + ")");
  checkFloatOperand(op, "dout", dout);
  if (want_dx) {
    checkFloatOperand(op, "dx", dx);
    checkAlias(op, "dx", dx, "dout", dout, false);
  }
  if (want_token) {
    checkFloatOperand(op, "dtoken", dtoken);
    checkAlias(op, "dtoken", dtoken, "dout", dout, false);
  }
  if (want_dx && want_token) checkAlias(op, "dtoken", dtoken, "dx", dx, false);

  vk::Context& ctx = rec.context();
  // An output not wanted is switched off in the kernel; its binding takes the other's view.
  const TensorView& dx_arg = want_dx ? dx : dtoken;
  const TensorView& dtoken_arg = want_token ? dtoken : dx;
  const Bound bo = bindStorage(ctx, dout), bx = bindStorage(ctx, dx_arg),
              bt = bindStorage(ctx, dtoken_arg);
  const int64_t c = dout.shape[2];
  // Without dx only the C invocations that own dtoken's sums have work.
  const PrependTokenPush push{uint32_t(want_dx ? dx.shape.numel() : c),
                              uint32_t(dout.shape[0]),
                              uint32_t(x_shape[1]),
                              uint32_t(c),
                              {bo.skip, bx.skip, bt.skip}};
  const vk::Kernel& kernel = floatKernel(
      ctx, "prepend_token/backward",
      {{"local_size_x", workgroupSize(ctx)},
       {"kDx", want_dx},
       {"kDtoken", want_token},
       {"kAccumulateDx", dx_write == Write::Accumulate},
       {"kAccumulateDtoken", dtoken_write == Write::Accumulate}},
      {{"dy_dtype", dout.dtype}, {"dx_dtype", dx_arg.dtype}, {"dtoken_dtype", dtoken_arg.dtype}});
  const vk::Arg args[] = {bo.arg, bx.arg, bt.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
}

}  // namespace vkgrad::ops
