#include "vkgrad/ops/copy.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct CopyPush {
  uint32_t n;                   // elements: 32-bit words, or 16-bit values
  uint32_t src_skip, dst_skip;  // first elements inside the bindings
};
static_assert(sizeof(CopyPush) == 12);

bool texelReadable(const vk::Context& context, const TensorView& src) {
  return src.dtype == DType::F32 && texelFits(context, src, vk::TexelFormat::Rgba32f);
}

}  // namespace

const char* copyVariantName(CopyVariant variant) {
  switch (variant) {
    case CopyVariant::Auto:
      return "auto";
    case CopyVariant::Storage:
      return "storage";
    case CopyVariant::Texel:
      return "texel";
  }
  return "?";
}

void copy(vk::Recorder& rec, const TensorView& src, const TensorView& dst, CopyVariant variant) {
  const char* op = "copy";
  if (src.shape.numel() != dst.shape.numel())
    throw ShapeError(std::string(op) + ": src " + src.shape.str() + " and dst " + dst.shape.str() +
                     " differ in element count");
  if (src.dtype != dst.dtype)
    throw ShapeError(
        std::string(op) + ": src is " + dtypeName(src.dtype) + ", dst is " + dtypeName(dst.dtype) +
        (isFloat(src.dtype) && isFloat(dst.dtype) ? " (ops::convert changes a float format)" : ""));
  checkFits(op, "src", src, src.dtype);
  checkFits(op, "dst", dst, dst.dtype);
  if (src.shape.numel() > (int64_t(1) << 31))
    throw ShapeError(std::string(op) + ": src " + src.shape.str() + " has more than 2^31 elements");
  checkAlias(op, "dst", dst, "src", src, false);
  const uint64_t n = uint64_t(src.shape.numel());
  if (n == 0) return;

  vk::Context& ctx = rec.context();
  // The texel kernel stores whole vec4s: dst must start on a 16-byte word of its binding.
  const bool texel_ok = texelReadable(ctx, src) && vec4Storable(ctx, dst);
  if (variant == CopyVariant::Auto) variant = texel_ok ? CopyVariant::Texel : CopyVariant::Storage;
  if (variant == CopyVariant::Texel && !texel_ok)
    throw Error("copy: src " + src.shape.str() + " (" + dtypeName(src.dtype) +
                ") cannot be read through an RGBA32F texel view, or dst cannot take 16-byte "
                "stores (u32, a start that is not 16-byte aligned, or too many elements)");
  const bool texel = variant == CopyVariant::Texel;
  // 16-bit elements take copy/copy's 16-bit build, which copies their bits.
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)}};
  const vk::Kernel& kernel = texel ? ctx.kernels().get("copy/copy_texel", constants)
                             : dtypeBytes(src.dtype) == 2
                                 ? floatKernel(ctx, "copy/copy", constants,
                                               {{"src_dtype", src.dtype}, {"dst_dtype", dst.dtype}})
                                 : ctx.kernels().get("copy/copy", constants);
  const Bound bs = texel ? bindTexel(ctx, src, vk::TexelFormat::Rgba32f) : bindStorage(ctx, src);
  const Bound bd = bindStorage(ctx, dst);
  const CopyPush push{uint32_t(n), bs.skip, bd.skip};
  const vk::Arg args[] = {bs.arg, bd.arg};
  rec.dispatchGroups(
      kernel, args, &push, sizeof(push),
      gridGroups(rec.context(), texel ? (n + 3) / 4 : n, workgroupSize(rec.context())));
}

}  // namespace vkgrad::ops
