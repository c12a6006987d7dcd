#include "vkgrad/ops/strided_copy.h"

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

constexpr int kRank = Shape::kMaxRank;

struct StridedCopyPush {
  uint32_t dims[kRank];  // the space, padded with leading 1s
  uint32_t src_strides[kRank], dst_strides[kRank];
  uint32_t src_start, dst_start;  // binding skip + start
  uint32_t n;
  float alpha;
};
static_assert(sizeof(StridedCopyPush) == 88);

// The largest element index the copy reaches in a view (negative strides are refused).
int64_t lastIndex(const Shape& space, const Strided& s) {
  int64_t last = s.start;
  for (int a = 0; a < space.rank(); ++a) last += (space[a] - 1) * s.strides[size_t(a)];
  return last;
}

}  // namespace

std::array<int64_t, Shape::kMaxRank> contiguousStrides(const Shape& shape) {
  std::array<int64_t, Shape::kMaxRank> strides{};
  int64_t stride = 1;
  for (int a = shape.rank() - 1; a >= 0; --a) strides[size_t(a)] = stride, stride *= shape[a];
  return strides;
}

void stridedCopy(vk::Recorder& rec, const char* op, const Shape& space, const Strided& src,
                 const Strided& dst, float alpha, Write w) {
  const std::string shapes = std::string(op) + ": " + src.view.shape.str() + " -> " +
                             dst.view.shape.str() + " over " + space.str();
  if (int(src.strides.size()) < space.rank() || int(dst.strides.size()) < space.rank())
    throw ShapeError(shapes + ": a stride for every axis of the space");
  for (int a = 0; a < space.rank(); ++a)
    if (src.strides[size_t(a)] < 0 || dst.strides[size_t(a)] < 0)
      throw ShapeError(shapes + ": negative strides");
  if (src.start < 0 || dst.start < 0) throw ShapeError(shapes + ": negative start");
  const bool float_math = alpha != 1.0f || w == Write::Accumulate;
  const bool words = src.view.dtype == dst.view.dtype && dtypeBytes(src.view.dtype) == 4;
  if (float_math || !words) {
    checkFloatOperand(op, "src", src.view);
    checkFloatOperand(op, "dst", dst.view);
  } else {
    checkFits(op, "src", src.view, src.view.dtype);
    checkFits(op, "dst", dst.view, dst.view.dtype);
  }
  checkAlias(op, "dst", dst.view, "src", src.view, false);
  const int64_t n = space.numel();
  if (n == 0) return;
  if (n >= (int64_t(1) << 31)) throw ShapeError(shapes + ": 2^31 elements or more");
  if (lastIndex(space, src) >= src.view.shape.numel() ||
      lastIndex(space, dst) >= dst.view.shape.numel())
    throw ShapeError(shapes + ": the strides reach past a view's end");

  vk::Context& ctx = rec.context();
  const auto bs = bindStorage(ctx, src.view), bd = bindStorage(ctx, dst.view);
  StridedCopyPush push{};
  const int pad = kRank - space.rank();
  for (int a = 0; a < kRank; ++a) {
    const bool real = a >= pad;
    push.dims[a] = real ? uint32_t(space[a - pad]) : 1;
    push.src_strides[a] = real ? uint32_t(src.strides[size_t(a - pad)]) : 0;
    push.dst_strides[a] = real ? uint32_t(dst.strides[size_t(a - pad)]) : 0;
  }
  push.src_start = bs.skip + uint32_t(src.start);
  push.dst_start = bd.skip + uint32_t(dst.start);
  push.n = uint32_t(n);
  push.alpha = alpha;
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)},
                                    {"ACCUMULATE", w == Write::Accumulate},
                                    {"SCALED", alpha != 1.0f}};
  // u32 moves as f32 words (the f32 build copies bits).
  const auto format = [](DType d) { return d == DType::U32 ? DType::F32 : d; };
  const vk::Kernel& kernel =
      floatKernel(ctx, "strided_copy/strided_copy", constants,
                  {{"src_dtype", format(src.view.dtype)}, {"dst_dtype", format(dst.view.dtype)}});
  const vk::Arg args[] = {bs.arg, bd.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(ctx, uint64_t(n), workgroupSize(ctx)));
}

}  // namespace vkgrad::ops
