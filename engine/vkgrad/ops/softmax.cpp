#include "vkgrad/ops/softmax.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>

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
constexpr vk::TexelFormat kRgba32f = vk::TexelFormat::Rgba32f;

// The push constants of every rowMap / rowMapBackward kernel (softmax/rows.glsl users).
struct RowMapPush {
  uint32_t rows;            // numel / n
  uint32_t n;               // length of the last axis
  uint32_t x_skip, y_skip;  // first elements inside the bindings
};
static_assert(sizeof(RowMapPush) == 16);

struct RowMapBackwardPush {
  uint32_t rows, n;
  uint32_t y_skip, dy_skip, dx_skip;
};
static_assert(sizeof(RowMapBackwardPush) == 20);

// Rows up to this long get one invocation each. Measured on lavapipe (100k-1.6M rows):
// at N <= 64 one invocation per row is 1.5-3x faster than a subgroup per row, at 128-256
// they are even. On GPUs the per-invocation loads do not coalesce, so the limit is lower.
uint64_t rowPerInvocationMaxN(const vk::Context& context) {
  return context.info().isCpu() ? 64 : 32;
}
constexpr uint32_t kRowPerInvocationGroup = 64;
constexpr uint32_t kWorkgroupPerRow = 128;

bool usesTexels(SoftmaxVariant v) {
  return v == SoftmaxVariant::WorkgroupTexel || v == SoftmaxVariant::SubgroupTexel;
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

SoftmaxVariant softmaxVariantFor(const vk::Context& context, bool texels_fit, int64_t n) {
  // A CPU driver's subgroup is its SIMD width, fixed, so a workgroup of that size is one
  // subgroup. A GPU driver may split a workgroup into smaller subgroups than reported unless
  // it reports one fixed size; with one (an H100: 32), rows of up to 64 columns run 2.4x
  // faster a subgroup per row, longer ones a workgroup per row (BENCHMARKS.md, row kernels on
  // the GPU).
  const vk::DeviceInfo& info = context.info();
  if (info.isCpu() || (info.fixedSubgroupSize() && n > 0 && n <= kSubgroupRowsMaxN))
    return texels_fit ? SoftmaxVariant::SubgroupTexel : SoftmaxVariant::SubgroupStorage;
  return texels_fit ? SoftmaxVariant::WorkgroupTexel : SoftmaxVariant::WorkgroupStorage;
}

SoftmaxVariant softmaxVariantFor(const vk::Context& context, const TensorView& x) {
  return softmaxVariantFor(context, texelFits(context, x, kR32f), x.shape.back());
}

SoftmaxLayout softmaxLayout(const char* op, const vk::Context& context, SoftmaxVariant variant,
                            uint64_t rows, uint64_t n, bool texels_fit) {
  if (usesTexels(variant) && !texels_fit)
    throw ShapeError(std::string(op) + ": " + softmaxVariantName(variant) +
                     ": an input does not fit an R32F texel view (f32, maxTexelBufferElements " +
                     std::to_string(context.info().max_texel_buffer_elements) + ")");
  if (variant == SoftmaxVariant::Auto) variant = softmaxVariantFor(context, texels_fit, int64_t(n));
  SoftmaxLayout layout;
  layout.texel = usesTexels(variant);
  layout.row_per_invocation = n <= rowPerInvocationMaxN(context);
  const bool one_subgroup =
      variant == SoftmaxVariant::SubgroupStorage || variant == SoftmaxVariant::SubgroupTexel;
  layout.one_subgroup = one_subgroup && !layout.row_per_invocation;
  layout.group = layout.row_per_invocation ? kRowPerInvocationGroup
                 : one_subgroup            ? std::max(1u, context.info().subgroup_size)
                                           : kWorkgroupPerRow;
  // The kernels grid-stride over rows, so the grid may be capped; a lane of a row's
  // workgroup loops over n / group of its elements per row.
  if (layout.row_per_invocation) {
    layout.groups = gridGroups(context, rows, layout.group);
    return layout;
  }
  const uint64_t steps = (n + layout.group - 1) / layout.group;
  if (context.info().isCpu() && steps > kCpuLaneSteps)
    throw ShapeError(std::string(op) + ": rows of " + std::to_string(n) +
                     " elements are more than " + std::to_string(kCpuLaneSteps * layout.group) +
                     " (a lane's loop budget on " + context.info().name + ", " +
                     softmaxVariantName(variant) + ")");
  layout.groups = rowGroups(context, rows, steps);
  return layout;
}

RowInput bindRowInput(const vk::Context& context, const TensorView& t, bool texel,
                      vk::TexelFormat format) {
  const Bound storage = bindStorage(context, t);
  const vk::Arg dummy(*t.buffer, storage.arg.offset, 4, kR32f);
  return {storage.arg, texel ? bindTexel(context, t, format).arg : dummy, storage.skip};
}

void checkRowShapes(const char* op, const std::string& shapes, const char* x_name,
                    const TensorView& x, const char* like_name, const TensorView& like) {
  const std::string at = std::string(op) + ": " + shapes + ": ";
  if (x.shape.rank() < 1) throw ShapeError(at + x_name + " needs at least one dim");
  if (!(like.shape == x.shape)) throw ShapeError(at + like_name + " must be shaped like " + x_name);
  if (x.shape.numel() == 0) throw ShapeError(at + x_name + " is empty");
  if (x.shape.back() > UINT32_MAX || x.shape.rows() > UINT32_MAX)
    throw ShapeError(at + "rows and N must fit 32 bits");
}

namespace {

// checkRowOperand's limits, past the dtype check.
void checkRowRange(const char* op, const char* name, const vk::Context& context,
                   const TensorView& t) {
  if (t.shape.numel() > (int64_t(1) << 31))
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() +
                     " has more than 2^31 elements");
  const uint64_t bound = bindStorage(context, t).arg.bytes;
  if (bound > context.info().max_storage_buffer_range)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + ": " +
                     std::to_string(bound) + " bytes exceed the device's maxStorageBufferRange (" +
                     std::to_string(context.info().max_storage_buffer_range) + ")");
}

}  // namespace

void checkRowOperand(const char* op, const char* name, const vk::Context& context,
                     const TensorView& t, DType dtype) {
  checkFits(op, name, t, dtype);
  checkRowRange(op, name, context, t);
}

void checkRowFloatOperand(const char* op, const char* name, const vk::Context& context,
                          const TensorView& t) {
  checkFloat(op, name, t);
  checkRowRange(op, name, context, t);
}

vk::SpecConstants rowsSpec(const SoftmaxLayout& l) {
  return {{"local_size_x", l.group},
          {"kRowPerInvocation", l.row_per_invocation},
          {"kOneSubgroup", l.one_subgroup},
          {"kTexelInput", l.texel}};
}

namespace {

// Whether a kernel with `vec4` reads 4 columns per RGBA32F fetch of every input in `inputs`
// (row_kernels.h, rowMap).
bool vec4Rows(const vk::Context& context, bool vec4, const SoftmaxLayout& l, uint64_t n,
              std::initializer_list<const TensorView*> inputs) {
  if (!vec4 || !l.texel || l.row_per_invocation || n % 4 != 0) return false;
  for (const TensorView* t : inputs)
    if (!texelFits(context, *t, kRgba32f)) return false;
  return true;
}

// Texels each lane holds of a row of n columns (kLaneTexels), or 0 when they are more than
// laneTexelsMax: then the kernel fetches each texel three times (backward: twice) instead of
// once. 32 vec4 per lane spill from llvmpipe's 16 vector registers, but the spills cost less
// than fetches, up to 128 (4096 columns at 8 lanes: forward 1.5-1.6x, backward 1.27-1.6x at
// 4096 x 4096; BENCHMARKS.md, softmax). GPUs keep 32: a lane's registers are few, and spills
// there go to memory.
uint32_t laneTexelsMax(const vk::Context& context) {
  return context.info().isCpu() ? 128 : 32;
}
uint32_t laneTexels(const vk::Context& context, const SoftmaxLayout& l, uint64_t n) {
  const uint64_t texels = (n / 4 + l.group - 1) / l.group;
  return texels <= laneTexelsMax(context) ? uint32_t(texels) : 0;
}

}  // namespace

void rowMap(vk::Recorder& rec, const char* op, const char* kernel_name, const TensorView& x,
            const TensorView& y, SoftmaxVariant variant, bool vec4) {
  vk::Context& ctx = rec.context();
  checkRowShapes(op, "x " + x.shape.str() + ", y " + y.shape.str(), "x", x, "y", y);
  checkRowFloatOperand(op, "x", ctx, x);
  checkRowFloatOperand(op, "y", ctx, y);
  checkInPlaceDtype(op, "y", y, "x", x);
  checkAlias(op, "y", y, "x", x, true);
  const SoftmaxLayout l = softmaxLayout(op, ctx, variant, uint64_t(x.shape.rows()),
                                        uint64_t(x.shape.back()), texelFits(ctx, x, kR32f));
  const bool four = vec4Rows(ctx, vec4, l, uint64_t(x.shape.back()), {&x});
  vk::SpecConstants spec = rowsSpec(l);
  if (vec4) {
    spec.push_back({"kVec4", four});
    spec.push_back({"kStore4", four && vec4Storable(ctx, y)});
    spec.push_back({"kLaneTexels", four ? laneTexels(ctx, l, uint64_t(x.shape.back())) : 0u});
  }
  const vk::Kernel& kernel =
      floatKernel(ctx, kernel_name, spec, {{"x_dtype", x.dtype}, {"y_dtype", y.dtype}});
  const RowInput bx = bindRowInput(ctx, x, l.texel, four ? kRgba32f : kR32f);
  const Bound by = bindStorage(ctx, y);
  const RowMapPush push{uint32_t(x.shape.rows()), uint32_t(x.shape.back()), bx.skip, by.skip};
  const vk::Arg args[] = {bx.storage, bx.texel, by.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), l.groups);
}

void rowMapBackward(vk::Recorder& rec, const char* op, const char* kernel_name, const TensorView& y,
                    const TensorView& dy, const TensorView& dx, Write w, SoftmaxVariant variant,
                    bool vec4) {
  vk::Context& ctx = rec.context();
  const std::string shapes =
      "y " + y.shape.str() + ", dy " + dy.shape.str() + ", dx " + dx.shape.str();
  checkRowShapes(op, shapes, "y", y, "dy", dy);
  checkRowShapes(op, shapes, "y", y, "dx", dx);
  checkRowFloatOperand(op, "y", ctx, y);
  checkRowFloatOperand(op, "dy", ctx, dy);
  checkRowFloatOperand(op, "dx", ctx, dx);
  checkInPlaceDtype(op, "dx", dx, "y", y);
  checkInPlaceDtype(op, "dx", dx, "dy", dy);
  checkAlias(op, "dx", dx, "y", y, true);
  checkAlias(op, "dx", dx, "dy", dy, true);
  const SoftmaxLayout l =
      softmaxLayout(op, ctx, variant, uint64_t(y.shape.rows()), uint64_t(y.shape.back()),
                    texelFits(ctx, y, kR32f) && texelFits(ctx, dy, kR32f));
  vk::SpecConstants spec = rowsSpec(l);
  spec.push_back({"kAccumulate", w == Write::Accumulate});
  const bool four = vec4Rows(ctx, vec4, l, uint64_t(y.shape.back()), {&y, &dy});
  if (vec4) {
    spec.push_back({"kVec4", four});
    spec.push_back({"kStore4", four && vec4Storable(ctx, dx)});
    spec.push_back({"kLaneTexels", four ? laneTexels(ctx, l, uint64_t(y.shape.back())) : 0u});
  }
  const vk::Kernel& kernel =
      floatKernel(ctx, kernel_name, spec,
                  {{"y_dtype", y.dtype}, {"dy_dtype", dy.dtype}, {"dx_dtype", dx.dtype}});
  const vk::TexelFormat format = four ? kRgba32f : kR32f;
  const RowInput by = bindRowInput(ctx, y, l.texel, format),
                 bdy = bindRowInput(ctx, dy, l.texel, format);
  const Bound bdx = bindStorage(ctx, dx);
  const RowMapBackwardPush push{uint32_t(y.shape.rows()), uint32_t(y.shape.back()), by.skip,
                                bdy.skip, bdx.skip};
  const vk::Arg args[] = {by.storage, by.texel, bdy.storage, bdy.texel, bdx.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), l.groups);
}

void softmax(vk::Recorder& rec, const TensorView& x, const TensorView& y, SoftmaxVariant variant) {
  rowMap(rec, "softmax", "softmax/forward", x, y, variant, true);
}

void softmaxBackward(vk::Recorder& rec, const TensorView& y, const TensorView& dy,
                     const TensorView& dx, Write w, SoftmaxVariant variant) {
  rowMapBackward(rec, "softmaxBackward", "softmax/backward", y, dy, dx, w, variant, true);
}

}  // namespace vkgrad::ops
