#include "ops/softmax.h"

#include <algorithm>
#include <string>

#include "vk/context.h"
#include "vk/error.h"
#include "vk/kernel.h"

namespace vkgrad::ops {
namespace {

struct SoftmaxPush {
  uint32_t rows;     // numel / n
  uint32_t n;        // length of the last axis
  uint32_t x_first;  // element of the texel view that is x[0]
};
static_assert(sizeof(SoftmaxPush) == 12);

// Rows up to this long get one invocation each. Measured on lavapipe (100k-1.6M rows):
// at N <= 64 one invocation per row is 1.5-3x faster than a subgroup per row, at 128-256
// they are even. On GPUs the per-invocation loads do not coalesce, so the limit is lower.
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

bool usesTexels(SoftmaxVariant v) {
  return v == SoftmaxVariant::WorkgroupTexel || v == SoftmaxVariant::SubgroupTexel;
}

void checkArgs(const vk::Context& context, const TensorView& x, const TensorView& y,
               SoftmaxVariant variant) {
  const std::string shapes = "x " + x.shape.str() + ", y " + y.shape.str();
  if (x.shape.rank() < 1) throw ShapeError("softmax: " + shapes + ": x needs at least one dim");
  if (!(y.shape == x.shape)) throw ShapeError("softmax: " + shapes + ": y must be shaped like x");
  if (x.shape.numel() == 0) throw ShapeError("softmax: " + shapes + ": x is empty");
  if (x.shape.back() > UINT32_MAX || x.shape.rows() > UINT32_MAX)
    throw ShapeError("softmax: " + shapes + ": rows and N must fit 32 bits");
  checkFits("softmax", "x", x);
  checkFits("softmax", "y", y);
  // Also keeps every element index of the shader below 2^32.
  if (x.bytes() > context.info().max_storage_buffer_range)
    throw ShapeError("softmax: " + shapes + ": " + std::to_string(x.bytes()) +
                     " bytes exceed the device's maxStorageBufferRange (" +
                     std::to_string(context.info().max_storage_buffer_range) + ")");
  if (usesTexels(variant) && !fitsTexels(context, x))
    throw ShapeError("softmax: " + shapes + ": too many elements for the device's " +
                     "maxTexelBufferElements (" +
                     std::to_string(context.info().max_texel_buffer_elements) + ")");
  if (!context.info().subgroup_arithmetic)
    throw Error("softmax: " + context.info().name +
                " has no subgroup arithmetic in compute shaders");
}

}  // namespace

const char* softmaxVariantName(SoftmaxVariant variant) {
  switch (variant) {
    case SoftmaxVariant::Auto:
      return "auto";
    case SoftmaxVariant::WorkgroupStorage:
      return "workgroup_storage";
    case SoftmaxVariant::WorkgroupTexel:
      return "workgroup_texel";
    case SoftmaxVariant::SubgroupStorage:
      return "subgroup_storage";
    case SoftmaxVariant::SubgroupTexel:
      return "subgroup_texel";
  }
  return "?";
}

SoftmaxVariant softmaxVariantFor(const vk::Context& context, const TensorView& x) {
  // A CPU driver's subgroup is its SIMD width, fixed, so a workgroup of that size is one
  // subgroup; GPU drivers may split a workgroup into smaller subgroups than reported.
  const bool texels = fitsTexels(context, x);
  if (context.info().isCpu())
    return texels ? SoftmaxVariant::SubgroupTexel : SoftmaxVariant::SubgroupStorage;
  return texels ? SoftmaxVariant::WorkgroupTexel : SoftmaxVariant::WorkgroupStorage;
}

void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y) {
  softmax(rec, x, y, SoftmaxVariant::Auto);
}

void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y, SoftmaxVariant variant) {
  vk::Context& context = rec.context();
  checkArgs(context, x, y, variant);
  if (variant == SoftmaxVariant::Auto) variant = softmaxVariantFor(context, x);
  const bool texels = usesTexels(variant);
  const bool one_subgroup =
      variant == SoftmaxVariant::SubgroupStorage || variant == SoftmaxVariant::SubgroupTexel;
  const auto x_texels = texelArg(context, x, texels);
  const SoftmaxPush push{uint32_t(x.shape.rows()), uint32_t(x.shape.back()), x_texels.first};

  const bool row_per_invocation = push.n <= rowPerInvocationMaxN(context);
  const uint32_t group = row_per_invocation ? kRowPerInvocationGroup
                         : one_subgroup     ? std::max(1u, context.info().subgroup_size)
                                            : kWorkgroupPerRow;
  const vk::Kernel& kernel = context.kernels().get(
      "softmax/forward", {group, row_per_invocation, one_subgroup && !row_per_invocation, texels});
  // The shader grid-strides over rows, so the grid may be capped at the device limit.
  const uint32_t groups = std::min(row_per_invocation ? vk::divUp(push.rows, group) : push.rows,
                                   context.info().max_workgroup_count[0]);
  const vk::Arg args[] = {
      {*x.buffer, x.offset, x.bytes()}, x_texels.arg, {*y.buffer, y.offset, y.bytes()}};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), groups);
}

}  // namespace vkgrad::ops
