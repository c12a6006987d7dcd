#include "vkgrad/ops/activation.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr vk::TexelFormat kRgba = vk::TexelFormat::Rgba32f;

struct ActivationPush {
  uint32_t n;               // elements
  float param;              // LeakyRelu slope, Elu alpha
  uint32_t x_skip, y_skip;  // first elements inside the bindings
};
static_assert(sizeof(ActivationPush) == 16);

struct ActivationBackwardPush {
  uint32_t n;                                 // elements
  float param;                                // LeakyRelu slope, Elu alpha
  uint32_t x_skip, y_skip, dy_skip, dx_skip;  // first elements inside the bindings
};
static_assert(sizeof(ActivationBackwardPush) == 24);

void checkSameShape(const char* op, Activation kind, const char* name, const TensorView& t,
                    const TensorView& like) {
  if (!(t.shape == like.shape))
    throw ShapeError(std::string(op) + "(" + activationName(kind) + "): " + name + " " +
                     t.shape.str() + " must have the shape " + like.shape.str());
}

}  // namespace

const char* activationName(Activation kind) {
  switch (kind) {
    case Activation::Relu:
      return "relu";
    case Activation::LeakyRelu:
      return "leaky_relu";
    case Activation::GeluTanh:
      return "gelu_tanh";
    case Activation::GeluErf:
      return "gelu_erf";
    case Activation::Sigmoid:
      return "sigmoid";
    case Activation::Tanh:
      return "tanh";
    case Activation::Elu:
      return "elu";
    case Activation::Exp:
      return "exp";
    case Activation::Log:
      return "log";
    case Activation::Neg:
      return "neg";
    case Activation::Reciprocal:
      return "reciprocal";
    case Activation::Sqrt:
      return "sqrt";
    case Activation::Rsqrt:
      return "rsqrt";
    case Activation::Pow:
      return "pow";
    case Activation::Erf:
      return "erf";
    case Activation::Silu:
      return "silu";
    case Activation::Abs:
      return "abs";
  }
  return "?";
}

bool activationBackwardReadsX(Activation kind) {
  // Mirrors kGradReadsX in shaders/activation/activation.glsl.
  switch (kind) {
    case Activation::LeakyRelu:
    case Activation::GeluTanh:
    case Activation::GeluErf:
    case Activation::Elu:
    case Activation::Log:
    case Activation::Pow:
    case Activation::Erf:
    case Activation::Silu:
    case Activation::Abs:
      return true;
    default:
      return false;
  }
}

void activation(vk::Recorder& rec, Activation kind, const TensorView& x, const TensorView& y,
                float param) {
  const char* op = "activation";
  checkSameShape(op, kind, "y", y, x);
  checkFloatOperand(op, "x", x);
  checkFloatOperand(op, "y", y);
  checkAlias(op, "y", y, "x", x, true);
  if (x.dtype != y.dtype && overlaps(x, y))
    throw ShapeError(std::string(op) + ": y in place of x needs x's dtype");
  const uint64_t n = uint64_t(x.shape.numel());
  if (n == 0) return;
  vk::Context& ctx = rec.context();
  // The texel kernel fetches x and stores y four floats at a time.
  const bool texel = texelFits(ctx, x, kRgba) && vec4Storable(ctx, y);
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)}, {"KIND", uint32_t(kind)}};
  const vk::Kernel& kernel =
      texel ? ctx.kernels().get("activation/forward_texel", constants)
            : floatKernel(ctx, "activation/forward", constants,
                          {{"x_dtype", x.dtype}, {"y_dtype", y.dtype}});
  const auto bx = texel ? bindTexel(ctx, x, kRgba) : bindStorage(ctx, x);
  const auto by = bindStorage(ctx, y);
  const ActivationPush push{uint32_t(n), param, bx.skip, by.skip};
  const vk::Arg args[] = {bx.arg, by.arg};
  rec.dispatchGroups(
      kernel, args, &push, sizeof(push),
      gridGroups(rec.context(), texel ? (n + 3) / 4 : n, workgroupSize(rec.context())));
}

void activationBackward(vk::Recorder& rec, Activation kind, const TensorView& x,
                        const TensorView& y, const TensorView& dy, const TensorView& dx,
                        float param, Write w) {
  const char* op = "activationBackward";
  const bool reads_x = activationBackwardReadsX(kind);
  const TensorView& saved = reads_x ? x : y;
  const char* saved_name = reads_x ? "x" : "y";
  if (!saved.buffer)
    throw ShapeError(std::string(op) + "(" + activationName(kind) + ") needs " + saved_name +
                     ", got an empty view");
  checkSameShape(op, kind, saved_name, saved, dy);
  checkSameShape(op, kind, "dx", dx, dy);
  checkFloatOperand(op, saved_name, saved);
  checkFloatOperand(op, "dy", dy);
  checkFloatOperand(op, "dx", dx);
  if ((overlaps(dx, saved) && dx.dtype != saved.dtype) || (overlaps(dx, dy) && dx.dtype != dy.dtype))
    throw ShapeError(std::string(op) + ": dx in place of an input needs its dtype");
  checkAlias(op, "dx", dx, saved_name, saved, true);
  checkAlias(op, "dx", dx, "dy", dy, true);
  const uint64_t n = uint64_t(dy.shape.numel());
  if (n == 0) return;
  vk::Context& ctx = rec.context();
  const bool accumulate = w == Write::Accumulate;
  const bool texel = texelFits(ctx, saved, kRgba) && texelFits(ctx, dy, kRgba) &&
                     (!accumulate || texelFits(ctx, dx, kRgba)) && vec4Storable(ctx, dx);
  // The input the kind does not read is bound to dy, which is the right size.
  const TensorView& x_arg = reads_x ? x : dy;
  const TensorView& y_arg = reads_x ? dy : y;
  const vk::SpecConstants constants{
      {"local_size_x", workgroupSize(ctx)}, {"KIND", uint32_t(kind)}, {"ACCUMULATE", accumulate}};
  const vk::Kernel& kernel =
      texel ? ctx.kernels().get("activation/backward_texel", constants)
            : floatKernel(ctx, "activation/backward", constants,
                          {{"x_dtype", x_arg.dtype},
                           {"y_dtype", y_arg.dtype},
                           {"dy_dtype", dy.dtype},
                           {"dx_dtype", dx.dtype}});
  const auto bind = [&](const TensorView& t) {
    return texel ? bindTexel(ctx, t, kRgba) : bindStorage(ctx, t);
  };
  const auto bx = bind(x_arg), by = bind(y_arg), bdy = bind(dy);
  const auto bdx = bindStorage(ctx, dx);
  const ActivationBackwardPush push{uint32_t(n), param, bx.skip, by.skip, bdy.skip, bdx.skip};
  if (texel) {
    const auto acc = accumulate ? bindTexel(ctx, dx, kRgba) : bdy;
    const vk::Arg args[] = {bx.arg, by.arg, bdy.arg, acc.arg, bdx.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(rec.context(), (n + 3) / 4, workgroupSize(rec.context())));
  } else {
    const vk::Arg args[] = {bx.arg, by.arg, bdy.arg, bdx.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(rec.context(), n, workgroupSize(rec.context())));
  }
}

}  // namespace vkgrad::ops
