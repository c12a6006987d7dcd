#include "vkgrad/ops/segment_pool.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr uint32_t kWorkgroup = 64;

struct ForwardPush {
  uint32_t nodes, graphs, features;
  uint32_t x_skip, segments_skip, out_skip, argmax_skip;
};
static_assert(sizeof(ForwardPush) == 28);

struct BackwardPush {
  uint32_t nodes, graphs, features;
  uint32_t segments_skip, argmax_skip, dout_skip, dx_skip;
};
static_assert(sizeof(BackwardPush) == 28);

// The KIND constant of shaders/segment_pool/.
uint32_t kindConstant(Pool kind) {
  return kind == Pool::Sum ? 0u : kind == Pool::Mean ? 1u : 2u;
}

void checkShaped(const char* op, const char* name, const TensorView& t, const Shape& shape,
                 DType dtype) {
  if (!(t.shape == shape) || t.dtype != dtype)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " " +
                     dtypeName(t.dtype) + " must be " + dtypeName(dtype) + " " + shape.str());
  checkFits(op, name, t, dtype);
}

// The same for a float tensor in any format (f32, f16 or bf16).
void checkShapedFloat(const char* op, const char* name, const TensorView& t, const Shape& shape) {
  if (!(t.shape == shape) || !isFloat(t.dtype))
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " " +
                     dtypeName(t.dtype) + " must be f32, f16 or bf16 " + shape.str());
  checkFloat(op, name, t);
}

// Max reads and writes the argmax; the others bind a 4-byte stand-in the kernel never touches.
Bound bindArgmax(const vk::Context& ctx, Pool kind, const TensorView& argmax, const Bound& other) {
  if (kind == Pool::Max) return bindStorage(ctx, argmax);
  return {vk::Arg(*other.arg.buffer, other.arg.offset, 4), 0};
}

}  // namespace

const char* poolName(Pool kind) {
  switch (kind) {
    case Pool::Sum:
      return "sum";
    case Pool::Mean:
      return "mean";
    case Pool::Max:
      return "max";
  }
  return "?";
}

Shape segmentPoolShape(const char* op, const Shape& x, DType x_dtype, const Shape& segments,
                       DType segments_dtype) {
  const std::string at = std::string(op) + ": x " + x.str() + ", segments " + segments.str() + ": ";
  if (!isFloat(x_dtype)) throw ShapeError(at + "x must be f32, f16 or bf16");
  if (segments_dtype != DType::U32) throw ShapeError(at + "segments must be u32");
  if (x.rank() != 2 || x.numel() == 0)
    throw ShapeError(at + "x must be (nodes, features), non-empty");
  if (x.numel() >= (int64_t(1) << 31)) throw ShapeError(at + "2^31 or more elements");
  if (segments.rank() != 1 || segments[0] < 2)
    throw ShapeError(at + "segments must be (graphs + 1) with at least one graph");
  if ((segments[0] - 1) * x[1] >= (int64_t(1) << 31))
    throw ShapeError(at + "2^31 or more pooled elements");
  return {segments[0] - 1, x[1]};
}

void segmentPool(vk::Recorder& rec, Pool kind, const TensorView& x, const TensorView& segments,
                 const TensorView& out, const TensorView& argmax) {
  const char* op = "segmentPool";
  const Shape shape = segmentPoolShape(op, x.shape, x.dtype, segments.shape, segments.dtype);
  checkShapedFloat(op, "out", out, shape);
  if (kind == Pool::Max) {
    checkShaped(op, "argmax", argmax, shape, DType::U32);
    checkAlias(op, "argmax", argmax, "x", x, false);
    checkAlias(op, "argmax", argmax, "segments", segments, false);
    checkAlias(op, "argmax", argmax, "out", out, false);
  }
  checkFloatOperand(op, "x", x);
  checkFits(op, "segments", segments, DType::U32);
  checkAlias(op, "out", out, "x", x, false);
  checkAlias(op, "out", out, "segments", segments, false);
  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), bs = bindStorage(ctx, segments), bo = bindStorage(ctx, out),
              ba = bindArgmax(ctx, kind, argmax, bo);
  const ForwardPush push{uint32_t(x.shape[0]),
                         uint32_t(shape[0]),
                         uint32_t(shape[1]),
                         bx.skip,
                         bs.skip,
                         bo.skip,
                         ba.skip};
  const vk::Arg args[] = {bx.arg, bs.arg, bo.arg, ba.arg};
  rec.dispatchGroups(floatKernel(ctx, "segment_pool/forward",
                                 {{"local_size_x", kWorkgroup}, {"KIND", kindConstant(kind)}},
                                 {{"x_dtype", x.dtype}, {"out_values_dtype", out.dtype}}),
                     args, &push, sizeof(push),
                     gridGroups(rec.context(), uint64_t(shape.numel()), kWorkgroup));
}

void segmentPoolBackward(vk::Recorder& rec, Pool kind, const TensorView& segments,
                         const TensorView& argmax, const TensorView& dout, const TensorView& dx,
                         Write w) {
  const char* op = "segmentPoolBackward";
  const Shape shape = segmentPoolShape(op, dx.shape, dx.dtype, segments.shape, segments.dtype);
  checkShapedFloat(op, "dout", dout, shape);
  if (kind == Pool::Max) {
    checkShaped(op, "argmax", argmax, shape, DType::U32);
    checkAlias(op, "dx", dx, "argmax", argmax, false);
  }
  checkFloatOperand(op, "dx", dx);
  checkFits(op, "segments", segments, DType::U32);
  checkAlias(op, "dx", dx, "dout", dout, false);
  checkAlias(op, "dx", dx, "segments", segments, false);
  vk::Context& ctx = rec.context();
  const Bound bs = bindStorage(ctx, segments), bd = bindStorage(ctx, dout),
              bx = bindStorage(ctx, dx), ba = bindArgmax(ctx, kind, argmax, bd);
  const BackwardPush push{uint32_t(dx.shape[0]),
                          uint32_t(shape[0]),
                          uint32_t(shape[1]),
                          bs.skip,
                          ba.skip,
                          bd.skip,
                          bx.skip};
  const vk::Arg args[] = {bs.arg, ba.arg, bd.arg, bx.arg};
  rec.dispatchGroups(floatKernel(ctx, "segment_pool/backward",
                                 {{"local_size_x", kWorkgroup},
                                  {"KIND", kindConstant(kind)},
                                  {"kAccumulate", w == Write::Accumulate}},
                                 {{"dout_dtype", dout.dtype}, {"dx_dtype", dx.dtype}}),
                     args, &push, sizeof(push),
                     gridGroups(rec.context(), uint64_t(dx.shape.numel()), kWorkgroup));
}

}  // namespace vkgrad::ops
