#include "vkgrad/ops/permute.h"

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

struct PermutePush {
  uint32_t n, src_skip, dst_skip;
  uint32_t dims[Shape::kMaxRank], strides[Shape::kMaxRank];
};
static_assert(sizeof(PermutePush) == 60);

std::string permText(std::span<const int> perm) {
  std::string text = "(";
  for (size_t i = 0; i < perm.size(); ++i) text += (i ? "," : "") + std::to_string(perm[i]);
  return text + ")";
}

}  // namespace

void permute(vk::Recorder& rec, const TensorView& src, const TensorView& dst,
             std::span<const int> perm) {
  const char* op = "permute";
  const int rank = src.shape.rank();
  const std::string shapes = std::string(op) + ": src " + src.shape.str() + ", dst " +
                             dst.shape.str() + ", perm " + permText(perm);
  if (int(perm.size()) != rank || dst.shape.rank() != rank)
    throw ShapeError(shapes + ": perm and dst need src's rank");
  bool seen[Shape::kMaxRank] = {};
  for (int i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= rank || seen[perm[i]])
      throw ShapeError(shapes + ": not a permutation");
    seen[perm[i]] = true;
    if (dst.shape[i] != src.shape[perm[i]])
      throw ShapeError(shapes + ": dst axis " + std::to_string(i) + " must have size " +
                       std::to_string(src.shape[perm[i]]));
  }
  if (src.dtype != dst.dtype)
    throw ShapeError(shapes + ": src is " + dtypeName(src.dtype) + ", dst " + dtypeName(dst.dtype));
  checkFits(op, "src", src, src.dtype);
  checkFits(op, "dst", dst, dst.dtype);
  checkAlias(op, "dst", dst, "src", src, false);
  const int64_t n = src.shape.numel();
  if (n == 0) return;
  if (n > (int64_t(1) << 31)) throw ShapeError(shapes + ": more than 2^31 elements");

  // Row-major strides of src, then dst axis i reads with the stride of src axis perm[i].
  int64_t src_strides[Shape::kMaxRank], stride = 1;
  for (int a = rank - 1; a >= 0; --a) src_strides[a] = stride, stride *= src.shape[a];
  vk::Context& ctx = rec.context();
  const Bound bs = bindStorage(ctx, src), bd = bindStorage(ctx, dst);
  PermutePush push{uint32_t(n), bs.skip, bd.skip, {1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0}};
  for (int i = 0; i < rank; ++i) {
    const int slot = Shape::kMaxRank - rank + i;
    push.dims[slot] = uint32_t(dst.shape[i]);
    push.strides[slot] = uint32_t(src_strides[perm[i]]);
  }
  // 16-bit elements take the kernel's 16-bit build, which moves their bits.
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)}};
  const vk::Kernel& kernel = dtypeBytes(src.dtype) == 2
                                 ? floatKernel(ctx, "permute/permute", constants,
                                               {{"src_dtype", src.dtype}, {"dst_dtype", dst.dtype}})
                                 : ctx.kernels().get("permute/permute", constants);
  const vk::Arg args[] = {bs.arg, bd.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), uint64_t(n), workgroupSize(rec.context())));
}

}  // namespace vkgrad::ops
