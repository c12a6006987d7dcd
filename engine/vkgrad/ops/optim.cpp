#include "vkgrad/ops/optim.h"

#include <algorithm>
#include <cmath>

#include "vkgrad/ops/binding.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr uint32_t kWorkgroup = 256;
constexpr uint32_t kMaxGroups = 4096;  // grid-stride kernels; far below maxComputeWorkGroupCount
// Gradient-norm partials: a 64-wide tree per workgroup (6 barriers), at least 1024
// elements per workgroup, at most 1024 partials per tensor.
constexpr uint32_t kNormWorkgroup = 64;
constexpr uint32_t kNormChunk = 1024;
constexpr uint32_t kMaxPartials = 1024;

struct SgdPush {
  uint32_t n;
  float momentum, weight_decay;
  uint32_t nesterov;
};
static_assert(sizeof(SgdPush) == 16);

struct AdamWPush {
  uint32_t n;
  float eps, weight_decay;
  uint32_t p_skip, g_skip, m_skip, v_skip;  // texel variant: first elements in the bindings
};
static_assert(sizeof(AdamWPush) == 28);

struct SumsqPush {
  uint32_t n, base;  // elements; first partial slot of this tensor
};
static_assert(sizeof(SumsqPush) == 8);

struct NormPush {
  uint32_t count;  // partial slots in all
  float max_norm;
};
static_assert(sizeof(NormPush) == 8);

struct ScalePush {
  uint32_t n;
};
static_assert(sizeof(ScalePush) == 4);

vk::Arg arg(const TensorView& t) {
  return {*t.buffer, t.offset, t.bytes()};
}

uint32_t groupsFor(uint64_t invocations) {
  return std::min<uint32_t>(vk::divUp(invocations, kWorkgroup), kMaxGroups);
}

void checkState(const char* op, const TensorView& state) {
  if (state.shape.numel() < 8)
    throw ShapeError(std::string(op) + ": optimizer state " + state.shape.str() +
                     " must hold 8 u32 words (OptimizerState)");
  checkFits(op, "state", state, DType::U32);
}

vk::Arg stateArg(const TensorView& state) {
  return {*state.buffer, state.offset, 32};
}

// Checks that every tensor has param's shape, is f32 and fits; returns the element count.
uint32_t checkTensors(const char* op,
                      std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  const TensorView& first = *tensors.begin()->second;
  std::string shapes;
  for (auto [name, t] : tensors)
    shapes += std::string(shapes.empty() ? "" : ", ") + name + " " + t->shape.str();
  for (auto [name, t] : tensors)
    if (!(t->shape == first.shape))
      throw ShapeError(std::string(op) + ": " + shapes + ": shapes must be equal");
  if (first.shape.numel() == 0) throw ShapeError(std::string(op) + ": " + shapes + ": empty");
  if (first.shape.numel() > int64_t(UINT32_MAX))
    throw ShapeError(std::string(op) + ": " + shapes + ": more than 2^32 - 1 elements");
  for (auto [name, t] : tensors) checkFits(op, name, *t);
  return uint32_t(first.shape.numel());
}

uint32_t partialsFor(int64_t n) {
  return std::min<uint32_t>(vk::divUp(uint64_t(n), kNormChunk), kMaxPartials);
}

}  // namespace

void advanceStep(vk::Recorder& rec, const TensorView& state) {
  checkState("advanceStep", state);
  const vk::Arg args[] = {stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optim/advance"), args, nullptr, 0, 1);
}

void sgd(vk::Recorder& rec, const TensorView& param, const TensorView& grad,
         const TensorView& velocity, const TensorView& state, const SgdOptions& options) {
  const uint32_t n =
      checkTensors("sgd", {{"param", &param}, {"grad", &grad}, {"velocity", &velocity}});
  checkState("sgd", state);
  const SgdPush push{n, options.momentum, options.weight_decay, options.nesterov ? 1u : 0u};
  const vk::Arg args[] = {arg(param), arg(grad), arg(velocity), stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optim/sgd", {kWorkgroup}), args, &push,
                     sizeof(push), groupsFor(n));
}

void adamw(vk::Recorder& rec, const TensorView& param, const TensorView& grad, const TensorView& m,
           const TensorView& v, const TensorView& state, const AdamWOptions& options) {
  const uint32_t n =
      checkTensors("adamw", {{"param", &param}, {"grad", &grad}, {"m", &m}, {"v", &v}});
  checkState("adamw", state);
  vk::Context& ctx = rec.context();
  constexpr vk::TexelFormat kRgba = vk::TexelFormat::Rgba32f;
  // The texel kernel reads param, m and v as texels and writes them as vec4s with one skip
  // per view, so both bindings of each must start the same whole texels before it.
  bool texel_ok = texelFits(ctx, grad, kRgba);
  for (const TensorView* t : {&param, &m, &v})
    texel_ok = texel_ok && texelFits(ctx, *t, kRgba) && vec4Storable(ctx, *t) &&
               bindTexel(ctx, *t, kRgba).skip == bindStorage(ctx, *t).skip;
  AdamWVariant variant = options.variant;
  if (variant == AdamWVariant::Auto)
    variant = texel_ok ? AdamWVariant::Texel : AdamWVariant::Storage;
  if (variant == AdamWVariant::Texel && !texel_ok)
    throw Error("adamw: param, grad, m and v " + param.shape.str() +
                " cannot all be read as RGBA32F texels and stored 16 bytes at a time (each "
                "must start on 16 bytes)");
  if (variant == AdamWVariant::Storage) {
    const AdamWPush push{n, options.eps, options.weight_decay, 0, 0, 0, 0};
    const vk::Arg args[] = {arg(param), arg(grad), arg(m), arg(v), stateArg(state)};
    rec.dispatchGroups(ctx.kernels().get("optim/adamw", {kWorkgroup}), args, &push, sizeof(push),
                       groupsFor(n));
    return;
  }
  const Bound tp = bindTexel(ctx, param, kRgba), tg = bindTexel(ctx, grad, kRgba),
              tm = bindTexel(ctx, m, kRgba), tv = bindTexel(ctx, v, kRgba);
  const AdamWPush push{n, options.eps, options.weight_decay, tp.skip, tg.skip, tm.skip, tv.skip};
  const vk::Arg args[] = {tp.arg,
                          tg.arg,
                          tm.arg,
                          tv.arg,
                          stateArg(state),
                          bindStorage(ctx, param).arg,
                          bindStorage(ctx, m).arg,
                          bindStorage(ctx, v).arg};
  rec.dispatchGroups(ctx.kernels().get("optim/adamw_texel", {kWorkgroup}), args, &push,
                     sizeof(push), groupsFor((uint64_t(n) + 3) / 4));
}

int64_t gradNormScratch(std::span<const TensorView> grads) {
  int64_t slots = 0;
  for (const TensorView& g : grads) slots += partialsFor(g.shape.numel());
  return slots;
}

void gradNorm(vk::Recorder& rec, std::span<const TensorView> grads, const TensorView& scratch,
              const TensorView& norm, float max_norm) {
  if (grads.empty()) throw ShapeError("gradNorm: no gradients");
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string name = "grads[" + std::to_string(i) + "]";
    checkTensors("gradNorm", {{name.c_str(), &grads[i]}});
  }
  const int64_t slots = gradNormScratch(grads);
  if (scratch.shape.numel() < slots)
    throw ShapeError("gradNorm: scratch " + scratch.shape.str() + " holds fewer than the " +
                     std::to_string(slots) + " partial sums these gradients need");
  checkFits("gradNorm", "scratch", scratch);
  if (norm.shape.numel() < 2)
    throw ShapeError("gradNorm: norm " + norm.shape.str() + " must hold 2 floats {norm, scale}");
  checkFits("gradNorm", "norm", norm);
  if (!(max_norm > 0.0f))
    throw ShapeError("gradNorm: max_norm " + std::to_string(max_norm) + " must be positive");

  vk::KernelCache& kernels = rec.context().kernels();
  const vk::Kernel& sumsq = kernels.get("optim/sumsq", {kNormWorkgroup});
  const vk::Arg scratch_arg{*scratch.buffer, scratch.offset, uint64_t(slots) * 4};
  uint32_t base = 0;
  for (const TensorView& g : grads) {
    const SumsqPush push{uint32_t(g.shape.numel()), base};
    const uint32_t groups = partialsFor(g.shape.numel());
    const vk::Arg args[] = {arg(g), scratch_arg};
    rec.dispatchGroups(sumsq, args, &push, sizeof(push), groups);
    base += groups;
  }
  const NormPush push{base, max_norm};
  const vk::Arg args[] = {scratch_arg, {*norm.buffer, norm.offset, 8}};
  rec.dispatchGroups(kernels.get("optim/norm", {kNormWorkgroup}), args, &push, sizeof(push), 1);
}

void clipGradNorm(vk::Recorder& rec, std::span<const TensorView> grads, float max_norm,
                  const TensorView& scratch, const TensorView& norm) {
  if (!std::isfinite(max_norm))
    throw ShapeError("clipGradNorm: max_norm " + std::to_string(max_norm) + " must be finite");
  gradNorm(rec, grads, scratch, norm, max_norm);
  const vk::Kernel& scale = rec.context().kernels().get("optim/scale", {kWorkgroup});
  for (const TensorView& g : grads) {
    const ScalePush push{uint32_t(g.shape.numel())};
    const vk::Arg args[] = {arg(g), {*norm.buffer, norm.offset, 8}};
    rec.dispatchGroups(scale, args, &push, sizeof(push), groupsFor(push.n));
  }
}

void clipGradScale(vk::Recorder& rec, std::span<const TensorView> grads, float max_norm,
                   const TensorView& scratch, const TensorView& norm, const TensorView& state) {
  if (!std::isfinite(max_norm))
    throw ShapeError("clipGradScale: max_norm " + std::to_string(max_norm) + " must be finite");
  checkState("clipGradScale", state);
  gradNorm(rec, grads, scratch, norm, max_norm);
  const vk::Arg args[] = {{*norm.buffer, norm.offset, 8}, stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optim/set_scale"), args, nullptr, 0, 1);
}

}  // namespace vkgrad::ops
