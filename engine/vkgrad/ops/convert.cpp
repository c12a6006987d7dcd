#include "vkgrad/ops/convert.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct ConvertPush {
  uint32_t n;                   // elements
  uint32_t src_skip, dst_skip;  // first elements inside the bindings
};
static_assert(sizeof(ConvertPush) == 12);

}  // namespace

void convert(vk::Recorder& rec, const TensorView& src, const TensorView& dst) {
  const char* op = "convert";
  if (src.shape.numel() != dst.shape.numel())
    throw ShapeError(std::string(op) + ": src " + src.shape.str() + " and dst " + dst.shape.str() +
                     " hold different numbers of elements");
  checkFloatOperand(op, "src", src);
  checkFloatOperand(op, "dst", dst);
  checkAlias(op, "dst", dst, "src", src, false);
  const uint64_t n = uint64_t(src.shape.numel());
  if (n == 0) return;
  vk::Context& ctx = rec.context();
  const vk::Kernel& kernel =
      floatKernel(ctx, "convert/convert", {{"local_size_x", workgroupSize(ctx)}},
                  {{"src_dtype", src.dtype}, {"dst_dtype", dst.dtype}});
  const Bound bs = bindStorage(ctx, src), bd = bindStorage(ctx, dst);
  const ConvertPush push{uint32_t(n), bs.skip, bd.skip};
  const vk::Arg args[] = {bs.arg, bd.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), gridGroups(ctx, n, workgroupSize(ctx)));
}

}  // namespace vkgrad::ops
