#include "ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "vk/context.h"
#include "vk/error.h"
#include "vk/kernel.h"

namespace vkgrad::ops {
namespace {

struct LayernormPush {
  uint32_t rows;  // numel / n
  uint32_t n;     // length of the last axis
  float eps;      // added to the variance
  // Element of each texel view that is the tensor's first (views start aligned).
  uint32_t x_first, gamma_first, beta_first;
};
static_assert(sizeof(LayernormPush) == 24);

// Rows up to this long get one invocation each (measured on lavapipe as for softmax: at
// N <= 64 1.3-3x faster than a subgroup per row). Per-invocation loads do not coalesce on
// GPUs, so the limit is lower there.
int64_t rowPerInvocationMaxN(const vk::Context& context) {
  return context.info().isCpu() ? 64 : 32;
}
constexpr uint32_t kRowPerInvocationGroup = 64;
constexpr uint32_t kWorkgroupPerRow = 128;

// A texel binding of t: its view starts at the aligned offset at or below t.offset, and
// `first` is where t begins in it. When unused, a one-texel view keeps the binding valid.
struct TexelArg {
  vk::Arg arg;
  uint32_t first;
};
uint64_t texelAlignment(const vk::Context& context) {
  return std::max<uint64_t>(4, context.info().min_texel_offset_alignment);
}
bool fitsTexels(const vk::Context& context, const TensorView& t) {
  const uint64_t first = t.offset % texelAlignment(context) / 4;
  return first + uint64_t(t.shape.numel()) <= context.info().max_texel_buffer_elements;
}
TexelArg texelArg(const vk::Context& context, const TensorView& t, bool used) {
  const uint64_t start = t.offset / texelAlignment(context) * texelAlignment(context);
  const uint32_t first = uint32_t((t.offset - start) / 4);
  const uint64_t bytes = used ? (first + uint64_t(t.shape.numel())) * 4 : 4;
  return {vk::Arg(*t.buffer, start, bytes, vk::TexelFormat::R32f), first};
}

bool usesTexels(LayernormVariant v) {
  return v == LayernormVariant::WorkgroupTexel || v == LayernormVariant::SubgroupTexel;
}

// (rows) or x's shape without its last dim.
bool isRowShape(const Shape& s, const Shape& x) {
  if (s.rank() == 1 && s[0] == x.rows()) return true;
  if (s.rank() != x.rank() - 1) return false;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] != x[i]) return false;
  return true;
}

void checkArgs(const vk::Context& context, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, LayernormVariant variant) {
  const std::string op = "layernorm: x " + x.shape.str();
  if (x.shape.rank() < 1) throw ShapeError(op + " needs at least one dim");
  if (x.shape.numel() == 0) throw ShapeError(op + " is empty");
  const int64_t n = x.shape.back(), rows = x.shape.rows();
  if (n > UINT32_MAX || rows > UINT32_MAX) throw ShapeError(op + ": rows and N must fit 32 bits");
  const std::string n_shape = "(" + std::to_string(n) + ")";
  if (!(gamma.shape == Shape{n}))
    throw ShapeError(op + " needs gamma " + n_shape + ", got " + gamma.shape.str());
  if (!(beta.shape == Shape{n}))
    throw ShapeError(op + " needs beta " + n_shape + ", got " + beta.shape.str());
  if (!(y.shape == x.shape)) throw ShapeError(op + " needs y shaped like x, got " + y.shape.str());
  const std::string rows_shape = "(" + std::to_string(rows) + ")";
  if (!isRowShape(mean.shape, x.shape))
    throw ShapeError(op + " needs mean " + rows_shape + ", got " + mean.shape.str());
  if (!isRowShape(rstd.shape, x.shape))
    throw ShapeError(op + " needs rstd " + rows_shape + ", got " + rstd.shape.str());
  if (!(eps >= 0.0f) || !std::isfinite(eps))
    throw ShapeError(op + ": eps must be finite and >= 0, got " + std::to_string(eps));
  checkFits("layernorm", "x", x);
  checkFits("layernorm", "gamma", gamma);
  checkFits("layernorm", "beta", beta);
  checkFits("layernorm", "y", y);
  checkFits("layernorm", "mean", mean);
  checkFits("layernorm", "rstd", rstd);
  const vk::DeviceInfo& info = context.info();
  // Also keeps every element index of the shader below 2^32.
  if (x.bytes() > info.max_storage_buffer_range)
    throw ShapeError(op + ": " + std::to_string(x.bytes()) +
                     " bytes exceed the device's maxStorageBufferRange (" +
                     std::to_string(info.max_storage_buffer_range) + ")");
  if (usesTexels(variant) &&
      !(fitsTexels(context, x) && fitsTexels(context, gamma) && fitsTexels(context, beta)))
    throw ShapeError(op + ": too many elements for the device's maxTexelBufferElements (" +
                     std::to_string(info.max_texel_buffer_elements) + ")");
  if (!info.subgroup_arithmetic)
    throw Error("layernorm: " + info.name + " has no subgroup arithmetic in compute shaders");
}

}  // namespace

const char* layernormVariantName(LayernormVariant variant) {
  switch (variant) {
    case LayernormVariant::Auto:
      return "auto";
    case LayernormVariant::WorkgroupStorage:
      return "workgroup_storage";
    case LayernormVariant::WorkgroupTexel:
      return "workgroup_texel";
    case LayernormVariant::SubgroupStorage:
      return "subgroup_storage";
    case LayernormVariant::SubgroupTexel:
      return "subgroup_texel";
  }
  return "?";
}

LayernormVariant layernormVariantFor(const vk::Context& context, const TensorView& x,
                                     const TensorView& gamma, const TensorView& beta) {
  // A CPU driver's subgroup is its SIMD width, fixed, so a workgroup of that size is one
  // subgroup; GPU drivers may split a workgroup into smaller subgroups than reported.
  const bool texels =
      fitsTexels(context, x) && fitsTexels(context, gamma) && fitsTexels(context, beta);
  if (context.info().isCpu())
    return texels ? LayernormVariant::SubgroupTexel : LayernormVariant::SubgroupStorage;
  return texels ? LayernormVariant::WorkgroupTexel : LayernormVariant::WorkgroupStorage;
}

void layernorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps) {
  layernorm(rec, x, gamma, beta, y, mean, rstd, eps, LayernormVariant::Auto);
}

void layernorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, LayernormVariant variant) {
  vk::Context& context = rec.context();
  checkArgs(context, x, gamma, beta, y, mean, rstd, eps, variant);
  if (variant == LayernormVariant::Auto) variant = layernormVariantFor(context, x, gamma, beta);
  const bool texels = usesTexels(variant);
  const bool one_subgroup =
      variant == LayernormVariant::SubgroupStorage || variant == LayernormVariant::SubgroupTexel;
  const auto x_texels = texelArg(context, x, texels);
  const auto gamma_texels = texelArg(context, gamma, texels);
  const auto beta_texels = texelArg(context, beta, texels);
  const LayernormPush push{uint32_t(x.shape.rows()), uint32_t(x.shape.back()), eps,
                           x_texels.first,           gamma_texels.first,       beta_texels.first};

  const bool row_per_invocation = push.n <= rowPerInvocationMaxN(context);
  const uint32_t group = row_per_invocation ? kRowPerInvocationGroup
                         : one_subgroup     ? std::max(1u, context.info().subgroup_size)
                                            : kWorkgroupPerRow;
  const vk::Kernel& kernel = context.kernels().get(
      "layernorm/forward",
      {group, row_per_invocation, one_subgroup && !row_per_invocation, texels});
  // The shader grid-strides over rows, so the grid may be capped at the device limit.
  const uint32_t groups = std::min(row_per_invocation ? vk::divUp(push.rows, group) : push.rows,
                                   context.info().max_workgroup_count[0]);
  const vk::Arg args[] = {{*x.buffer, x.offset, x.bytes()},
                          x_texels.arg,
                          {*gamma.buffer, gamma.offset, gamma.bytes()},
                          gamma_texels.arg,
                          {*beta.buffer, beta.offset, beta.bytes()},
                          beta_texels.arg,
                          {*y.buffer, y.offset, y.bytes()},
                          {*mean.buffer, mean.offset, mean.bytes()},
                          {*rstd.buffer, rstd.offset, rstd.bytes()}};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), groups);
}

}  // namespace vkgrad::ops
