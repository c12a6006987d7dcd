#include "vkgrad/ops/pool2d.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// pool2d/window.glsl's push constants.
struct PoolPush {
  uint32_t n, height, width, out_h, out_w;
  uint32_t kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  uint32_t skip_a = 0, skip_b = 0, skip_c = 0;
};
static_assert(sizeof(PoolPush) == 56);

std::string describe(const char* op, const Shape& x, const Pool2dParams& p) {
  return std::string(op) + ": x " + x.str() + " " + p.str();
}

// Checks x against the pooled shape y (y/dy, as the op names it) and fills the push constants
// for a dispatch over n elements.
PoolPush check(const char* op, const Shape& x, const TensorView& y, const char* y_name,
               const Pool2dParams& p, uint64_t n) {
  const Shape want = pool2dShape(op, x, p);
  if (!(y.shape == want))
    throw ShapeError(describe(op, x, p) + ": " + y_name + " " + y.shape.str() + " must be " +
                     want.str());
  checkFloatOperand(op, y_name, y);
  return {uint32_t(n),          uint32_t(x[2]),       uint32_t(x[3]),       uint32_t(want[2]),
          uint32_t(want[3]),    uint32_t(p.kernel_h), uint32_t(p.kernel_w), uint32_t(p.stride_h),
          uint32_t(p.stride_w), uint32_t(p.pad_h),    uint32_t(p.pad_w)};
}

void checkArgmax(const char* op, const TensorView& argmax, const Shape& y) {
  if (!(argmax.shape == y))
    throw ShapeError(std::string(op) + ": argmax " + argmax.shape.str() + " must be " + y.str());
  checkFits(op, "argmax", argmax, DType::U32);
}

void grid(vk::Recorder& rec, const vk::Kernel& kernel, std::span<const vk::Arg> args,
          const PoolPush& push) {
  vk::Context& ctx = rec.context();
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(ctx, push.n, workgroupSize(ctx)));
}

}  // namespace

Pool2dParams Pool2dParams::square(int64_t kernel, int64_t stride, int64_t pad) {
  const int64_t s = stride == 0 ? kernel : stride;
  return {kernel, kernel, s, s, pad, pad, true};
}

std::string Pool2dParams::str() const {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "kernel " + s(kernel_h) + "x" + s(kernel_w) + " stride " + s(stride_h) + "x" +
         s(stride_w) + " pad " + s(pad_h) + "x" + s(pad_w);
}

Shape pool2dShape(const char* op, const Shape& x, const Pool2dParams& p) {
  const std::string shapes = describe(op, x, p) + ": ";
  if (x.rank() != 4 || x.numel() == 0) throw ShapeError(shapes + "x must be a non-empty (N,C,H,W)");
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1)
    throw ShapeError(shapes + "kernel and stride must be at least 1");
  if (p.pad_h < 0 || p.pad_w < 0 || 2 * p.pad_h > p.kernel_h || 2 * p.pad_w > p.kernel_w)
    throw ShapeError(shapes + "padding must be in [0, kernel/2]");
  if (p.kernel_h > x[2] + 2 * p.pad_h || p.kernel_w > x[3] + 2 * p.pad_w)
    throw ShapeError(shapes + "the window is larger than the padded input");
  if (x.numel() >= (int64_t(1) << 31)) throw ShapeError(shapes + "more than 2^31 elements");
  return {x[0], x[1], (x[2] + 2 * p.pad_h - p.kernel_h) / p.stride_h + 1,
          (x[3] + 2 * p.pad_w - p.kernel_w) / p.stride_w + 1};
}

void maxPool2d(vk::Recorder& rec, const TensorView& x, const TensorView& y,
               const TensorView& argmax, const Pool2dParams& p) {
  const char* op = "maxPool2d";
  PoolPush push = check(op, x.shape, y, "y", p, uint64_t(y.shape.numel()));
  checkFloatOperand(op, "x", x);
  checkArgmax(op, argmax, y.shape);
  checkAlias(op, "y", y, "x", x, false);
  checkAlias(op, "argmax", argmax, "x", x, false);
  checkAlias(op, "argmax", argmax, "y", y, false);
  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), by = bindStorage(ctx, y), bi = bindStorage(ctx, argmax);
  push.skip_a = bx.skip, push.skip_b = by.skip, push.skip_c = bi.skip;
  const vk::Kernel& k =
      floatKernel(ctx, "pool2d/max_forward", {{"local_size_x", workgroupSize(ctx)}},
                  {{"x_dtype", x.dtype}, {"y_dtype", y.dtype}});
  const vk::Arg args[] = {bx.arg, by.arg, bi.arg};
  grid(rec, k, args, push);
}

void maxPool2dBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& argmax,
                       const TensorView& dx, const Pool2dParams& p, Write write) {
  const char* op = "maxPool2dBackward";
  PoolPush push = check(op, dx.shape, dy, "dy", p, uint64_t(dx.shape.numel()));
  checkFloatOperand(op, "dx", dx);
  checkArgmax(op, argmax, dy.shape);
  checkAlias(op, "dx", dx, "dy", dy, false);
  checkAlias(op, "dx", dx, "argmax", argmax, false);
  vk::Context& ctx = rec.context();
  const Bound bd = bindStorage(ctx, dy), bi = bindStorage(ctx, argmax), bx = bindStorage(ctx, dx);
  push.skip_a = bd.skip, push.skip_b = bx.skip, push.skip_c = bi.skip;
  const vk::Kernel& k = floatKernel(
      ctx, "pool2d/max_backward",
      {{"local_size_x", workgroupSize(ctx)}, {"kAccumulate", write == Write::Accumulate}},
      {{"dy_dtype", dy.dtype}, {"dx_dtype", dx.dtype}});
  const vk::Arg args[] = {bd.arg, bi.arg, bx.arg};
  grid(rec, k, args, push);
}

void avgPool2d(vk::Recorder& rec, const TensorView& x, const TensorView& y, const Pool2dParams& p) {
  const char* op = "avgPool2d";
  PoolPush push = check(op, x.shape, y, "y", p, uint64_t(y.shape.numel()));
  checkFloatOperand(op, "x", x);
  checkAlias(op, "y", y, "x", x, false);
  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), by = bindStorage(ctx, y);
  push.skip_a = bx.skip, push.skip_b = by.skip;
  const vk::Kernel& k =
      floatKernel(ctx, "pool2d/avg_forward",
                  {{"local_size_x", workgroupSize(ctx)}, {"kIncludePad", p.count_include_pad}},
                  {{"x_dtype", x.dtype}, {"y_dtype", y.dtype}});
  const vk::Arg args[] = {bx.arg, by.arg};
  grid(rec, k, args, push);
}

void avgPool2dBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx,
                       const Pool2dParams& p, Write write) {
  const char* op = "avgPool2dBackward";
  PoolPush push = check(op, dx.shape, dy, "dy", p, uint64_t(dx.shape.numel()));
  checkFloatOperand(op, "dx", dx);
  checkAlias(op, "dx", dx, "dy", dy, false);
  vk::Context& ctx = rec.context();
  const Bound bd = bindStorage(ctx, dy), bx = bindStorage(ctx, dx);
  push.skip_a = bd.skip, push.skip_b = bx.skip;
  const vk::Kernel& k = floatKernel(ctx, "pool2d/avg_backward",
                                    {{"local_size_x", workgroupSize(ctx)},
                                     {"kIncludePad", p.count_include_pad},
                                     {"kAccumulate", write == Write::Accumulate}},
                                    {{"dy_dtype", dy.dtype}, {"dx_dtype", dx.dtype}});
  const vk::Arg args[] = {bd.arg, bx.arg};
  grid(rec, k, args, push);
}

}  // namespace vkgrad::ops
