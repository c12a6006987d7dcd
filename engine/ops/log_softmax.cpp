#include "ops/log_softmax.h"

#include <string>

#include "ops/binding.h"
#include "vk/context.h"
#include "vk/error.h"
#include "vk/kernel.h"

namespace vkgrad::ops {
namespace {

constexpr vk::TexelFormat kR32f = vk::TexelFormat::R32f;

struct LogSoftmaxPush {
  uint32_t rows, n;         // numel / n, length of the last axis
  uint32_t x_skip, y_skip;  // first elements inside the bindings
};
static_assert(sizeof(LogSoftmaxPush) == 16);

struct LogSoftmaxBackwardPush {
  uint32_t rows, n;
  uint32_t y_skip, dy_skip, dx_skip;
};
static_assert(sizeof(LogSoftmaxBackwardPush) == 20);

}  // namespace

void logSoftmax(vk::Recorder& rec, const TensorView& x, const TensorView& y,
                SoftmaxVariant variant) {
  const char* op = "logSoftmax";
  vk::Context& ctx = rec.context();
  checkRowShapes(op, "x " + x.shape.str() + ", y " + y.shape.str(), "x", x, "y", y);
  checkRowOperand(op, "x", ctx, x);
  checkRowOperand(op, "y", ctx, y);
  checkAlias(op, "y", y, "x", x, true);
  const SoftmaxLayout l = softmaxLayout(op, ctx, variant, uint64_t(x.shape.rows()),
                                        uint64_t(x.shape.back()), texelFits(ctx, x, kR32f));
  const vk::Kernel& kernel = ctx.kernels().get(
      "log_softmax/forward", {l.group, l.row_per_invocation, l.one_subgroup, l.texel});
  const RowInput bx = bindRowInput(ctx, x, l.texel);
  const Bound by = bindStorage(ctx, y);
  const LogSoftmaxPush push{uint32_t(x.shape.rows()), uint32_t(x.shape.back()), bx.skip, by.skip};
  const vk::Arg args[] = {bx.storage, bx.texel, by.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), l.groups);
}

void logSoftmaxBackward(vk::Recorder& rec, const TensorView& y, const TensorView& dy,
                        const TensorView& dx, Write w, SoftmaxVariant variant) {
  const char* op = "logSoftmaxBackward";
  vk::Context& ctx = rec.context();
  const std::string shapes =
      "y " + y.shape.str() + ", dy " + dy.shape.str() + ", dx " + dx.shape.str();
  checkRowShapes(op, shapes, "y", y, "dy", dy);
  checkRowShapes(op, shapes, "y", y, "dx", dx);
  checkRowOperand(op, "y", ctx, y);
  checkRowOperand(op, "dy", ctx, dy);
  checkRowOperand(op, "dx", ctx, dx);
  checkAlias(op, "dx", dx, "y", y, true);
  checkAlias(op, "dx", dx, "dy", dy, true);
  const SoftmaxLayout l =
      softmaxLayout(op, ctx, variant, uint64_t(y.shape.rows()), uint64_t(y.shape.back()),
                    texelFits(ctx, y, kR32f) && texelFits(ctx, dy, kR32f));
  const vk::Kernel& kernel = ctx.kernels().get(
      "log_softmax/backward",
      {l.group, l.row_per_invocation, l.one_subgroup, l.texel, w == Write::Accumulate});
  const RowInput by = bindRowInput(ctx, y, l.texel), bdy = bindRowInput(ctx, dy, l.texel);
  const Bound bdx = bindStorage(ctx, dx);
  const LogSoftmaxBackwardPush push{uint32_t(y.shape.rows()), uint32_t(y.shape.back()), by.skip,
                                    bdy.skip, bdx.skip};
  const vk::Arg args[] = {by.storage, by.texel, bdy.storage, bdy.texel, bdx.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), l.groups);
}

}  // namespace vkgrad::ops
