#include "ops/matmul.h"

#include <algorithm>
#include <cstdint>

#include "ops/binding.h"
#include "vk/context.h"
#include "vk/error.h"
#include "vk/kernel.h"

namespace vkgrad::ops {
namespace {

struct MatmulPush {
  uint32_t m, n, k;              // a: (m,k), b: (k,n), c: (m,n)
  uint32_t a_off, b_off, c_off;  // floats from the start of each binding to its tensor
};
static_assert(sizeof(MatmulPush) == 24);

// Texel variant: rows of C per workgroup, and columns per lane (see shaders/matmul/texel.comp).
constexpr uint32_t kTexelRows = 16, kTexelLaneColumns = 8;

void checkShapes(const TensorView& a, const TensorView& b, const TensorView& c) {
  const std::string shapes = a.shape.str() + " x " + b.shape.str() + " -> " + c.shape.str();
  if (a.shape.rank() != 2 || b.shape.rank() != 2 || c.shape.rank() != 2)
    throw ShapeError("matmul: " + shapes + ": operands must be 2-D");
  if (a.shape[1] != b.shape[0]) throw ShapeError("matmul: " + shapes + ": inner dims differ");
  if (c.shape[0] != a.shape[0] || c.shape[1] != b.shape[1])
    throw ShapeError("matmul: " + shapes + ": output must be (" + std::to_string(a.shape[0]) + "," +
                     std::to_string(b.shape[1]) + ")");
  if (a.shape.numel() == 0 || b.shape.numel() == 0)
    throw ShapeError("matmul: " + shapes + ": empty operand");
  for (const TensorView* t : {&a, &b, &c})
    if (t->shape[0] > UINT32_MAX || t->shape[1] > UINT32_MAX)
      throw ShapeError("matmul: " + shapes + ": dims must fit 32 bits");
  checkFits("matmul", "a", a);
  checkFits("matmul", "b", b);
  checkFits("matmul", "c", c);
}

bool canShuffle(const vk::DeviceInfo& info) {
  return info.subgroup_compute && info.subgroup_shuffle && info.subgroup_size > 0;
}

// Whether R32F views of a and b (the Texel variant's largest) fit the device's texel limits.
bool texelViewsFit(const vk::Context& context, const TensorView& a, const TensorView& b) {
  return texelFits(context, a, vk::TexelFormat::R32f) && texelFits(context, b, vk::TexelFormat::R32f);
}

}  // namespace

const char* matmulVariantName(MatmulVariant variant) {
  switch (variant) {
    case MatmulVariant::Auto:
      return "auto";
    case MatmulVariant::Naive:
      return "naive";
    case MatmulVariant::Tiled:
      return "tiled";
    case MatmulVariant::Texel:
      return "texel";
  }
  return "?";
}

MatmulVariant matmulVariantFor(const vk::Context& context) {
  const vk::DeviceInfo& info = context.info();
  // On a CPU, shared memory and barriers are slow and texel fetches are cheap gathers;
  // on a GPU, shared-memory tiling is the classic win (DESIGN.md, measured facts).
  if (info.isCpu() && canShuffle(info)) return MatmulVariant::Texel;
  return MatmulVariant::Tiled;
}

void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            MatmulVariant variant) {
  checkShapes(a, b, c);
  vk::Context& context = rec.context();
  const vk::DeviceInfo& info = context.info();
  if (variant == MatmulVariant::Auto) {
    variant = matmulVariantFor(context);
    if (variant == MatmulVariant::Texel && !texelViewsFit(context, a, b))
      variant = MatmulVariant::Tiled;
  }
  const uint32_t m = uint32_t(a.shape[0]), n = uint32_t(b.shape[1]), k = uint32_t(a.shape[1]);

  if (variant == MatmulVariant::Texel) {
    if (!canShuffle(info))
      throw Error("matmul: the texel variant needs subgroup shuffle in compute shaders, which " +
                  info.name + " lacks");
    if (!texelViewsFit(context, a, b))
      throw Error("matmul: " + a.shape.str() + " x " + b.shape.str() +
                  ": an operand has more elements than a texel view of " + info.name +
                  " can hold; use the tiled variant");
    Bound ba = bindTexel(context, a, vk::TexelFormat::R32f);
    Bound bb = bindTexel(context, b, vk::TexelFormat::R32f);
    const Bound bc = bindStorage(context, c);
    // Whole-vec4 fetches need every row to start on a 16-byte texel; otherwise that operand
    // is read through an R32F view, four scalar fetches per vec4 (see texel.comp).
    const bool a_vec4 = k % 4 == 0 && ba.skip % 4 == 0;
    const bool b_vec4 = n % 4 == 0 && bb.skip % 4 == 0;
    if (a_vec4) ba.arg.texel = vk::TexelFormat::Rgba32f;
    if (b_vec4) bb.arg.texel = vk::TexelFormat::Rgba32f;
    // The workgroup is exactly one subgroup. For SPIR-V below 1.6 (ours is 1.5, Vulkan 1.2)
    // and no subgroup-size-control flags, compute runs with the reported subgroupSize.
    const uint32_t sg = info.subgroup_size;
    const vk::Kernel& kernel = context.kernels().get("matmul/texel", {sg, a_vec4, b_vec4});
    const MatmulPush push{m, n, k, ba.skip, bb.skip, bc.skip};
    const vk::Arg args[] = {ba.arg, bb.arg, bc.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(n, kTexelLaneColumns * sg),
                       vk::divUp(m, kTexelRows));
    return;
  }

  const Bound ba = bindStorage(context, a), bb = bindStorage(context, b),
              bc = bindStorage(context, c);
  const MatmulPush push{m, n, k, ba.skip, bb.skip, bc.skip};
  const vk::Arg args[] = {ba.arg, bb.arg, bc.arg};
  switch (variant) {
    case MatmulVariant::Naive: {
      // 16x16 invocations, or 16x8 where a workgroup may have fewer than 256 (the minimum is 128).
      const uint32_t rows = info.max_workgroup_invocations >= 256 ? 16 : 8;
      const vk::Kernel& kernel = context.kernels().get("matmul/naive", {16, rows});
      rec.dispatch(kernel, args, &push, sizeof(push), n, m);
      break;
    }
    case MatmulVariant::Tiled: {
      // 64x64 tiles of C, BK = 16: 16x16 invocations with 4x4 outputs each, or 8x8 with 8x8
      // where the device allows fewer than 256 invocations per workgroup (the minimum is 128).
      const uint32_t threads = info.max_workgroup_invocations >= 256 ? 16 : 8;
      const uint32_t per_thread = 64 / threads;
      const vk::Kernel& kernel =
          context.kernels().get("matmul/tiled", {threads, threads, 16, per_thread, per_thread});
      rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(n, 64), vk::divUp(m, 64));
      break;
    }
    case MatmulVariant::Texel:
    case MatmulVariant::Auto:
      break;  // handled above
  }
}

}  // namespace vkgrad::ops
