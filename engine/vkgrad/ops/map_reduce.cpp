#include "vkgrad/ops/map_reduce.h"

#include <algorithm>
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

struct MapReducePush {
  uint32_t dims[kRank];        // the space, padded with leading 1s
  uint32_t strides[3][kRank];  // per input, along each space axis; 0 where broadcast
  uint32_t skip[4];            // x, y, z, out
  uint32_t parts;              // partial folds per output (1: each output folds everything)
  uint32_t chunk;              // reduced elements per part
  uint32_t reduced;  // bit a: space axis a is folded; bits 8 and up: the axes walked (the last)
  float alpha;
};
static_assert(sizeof(MapReducePush) == 128, "Vulkan guarantees 128 bytes of push constants");

// Merges adjacent axes that every input walks as one (the outer axis's stride is the inner
// one's times its size, both folded or both kept) and drops size-1 axes, so the kernel walks
// as few axes as the layout needs: equal shapes become one axis. The rank the kernel walks
// goes in bits 8 and up of `reduced`.
void collapseAxes(MapReducePush& push) {
  struct Axis {
    uint32_t dim, strides[3];
    bool reduced;
  };
  Axis axes[kRank];
  int rank = 0;
  for (int a = 0; a < kRank; ++a) {
    if (push.dims[a] == 1) continue;
    const Axis b{push.dims[a],
                 {push.strides[0][a], push.strides[1][a], push.strides[2][a]},
                 ((push.reduced >> a) & 1u) != 0};
    if (rank > 0) {
      Axis& outer = axes[rank - 1];
      bool joins = outer.reduced == b.reduced;
      for (int t = 0; t < 3; ++t) joins = joins && outer.strides[t] == b.strides[t] * b.dim;
      if (joins) {
        outer.dim *= b.dim;
        for (int t = 0; t < 3; ++t) outer.strides[t] = b.strides[t];
        continue;
      }
    }
    axes[rank++] = b;
  }
  if (rank == 0) axes[rank++] = Axis{1, {0, 0, 0}, false};
  uint32_t reduced = 0;
  for (int a = 0; a < kRank; ++a) {
    const int i = a - (kRank - rank);
    const Axis axis = i >= 0 ? axes[i] : Axis{1, {0, 0, 0}, false};
    push.dims[a] = axis.dim;
    for (int t = 0; t < 3; ++t) push.strides[t][a] = axis.strides[t];
    if (axis.reduced) reduced |= 1u << a;
  }
  push.reduced = reduced | uint32_t(rank) << 8;
}

// The most reduced elements one invocation folds: a longer fold is split into parts of this
// many, folded again (partial sums, then their sum). Not a device's choice, so every device
// folds in the same order. At 1024 an invocation loops at most ~7,200 times (six walked axes),
// far inside llvmpipe's 65,535, and a GPU gets n_out * parts invocations, not n_out.
constexpr int64_t kFoldChunk = 1024;

// Partial results per output of a fold of n elements: 1 where one pass does it.
int64_t foldParts(int64_t n_fold) {
  return n_fold > kFoldChunk ? (n_fold + kFoldChunk - 1) / kFoldChunk : 1;
}

bool takesCondition(MapFn fn) {
  return fn == MapFn::Where || fn == MapFn::MaskTrue || fn == MapFn::MaskFalse;
}

std::string describe(const char* op, std::span<const TensorView> inputs, const Shape& space,
                     const TensorView& out) {
  std::string text = std::string(op) + ":";
  for (const TensorView& t : inputs) text += " " + t.shape.str();
  return text + " over " + space.str() + " -> " + out.shape.str();
}

// Records one pass of the kernel: `parts` partial folds per output (1: the whole fold) into
// out, which holds n_out * parts elements. The caller has checked every operand.
void recordFold(vk::Recorder& rec, MapFn fn, Fold fold, std::span<const TensorView> inputs,
                const Shape& space, uint32_t axes, const TensorView& out, float alpha, Write w,
                int64_t parts) {
  const int64_t n_out = reducedShape(space, axes, false).numel(), n_fold = space.numel() / n_out;
  MapReducePush push{};
  const int pad = kRank - space.rank();
  for (int a = 0; a < kRank; ++a) push.dims[a] = a < pad ? 1 : uint32_t(space[a - pad]);
  for (size_t t = 0; t < inputs.size(); ++t) {
    const TensorView& in = inputs[t];
    int64_t stride = 1;
    for (int a = in.shape.rank() - 1; a >= 0; --a) {
      push.strides[t][kRank - in.shape.rank() + a] = in.shape[a] == 1 ? 0 : uint32_t(stride);
      stride *= in.shape[a];
    }
  }
  vk::Context& ctx = rec.context();
  // Unused inputs are bound to x (any valid binding serves; the kernel never reads them).
  const TensorView& x = inputs[0];
  const TensorView& y = inputs.size() > 1 ? inputs[1] : x;
  const TensorView& z = inputs.size() > 2 ? inputs[2] : x;
  const auto bx = bindStorage(ctx, x), by = bindStorage(ctx, y), bz = bindStorage(ctx, z);
  const auto bo = bindStorage(ctx, out);
  push.skip[0] = bx.skip, push.skip[1] = by.skip, push.skip[2] = bz.skip, push.skip[3] = bo.skip;
  push.parts = uint32_t(parts);
  push.chunk = uint32_t(parts > 1 ? kFoldChunk : std::max<int64_t>(n_fold, 1));
  push.reduced = axes << pad;
  push.alpha = alpha;
  collapseAxes(push);
  // The kernel walks (push.reduced >> 8) axes twice per item and once per folded element.
  const uint64_t walked = push.reduced >> 8;
  const uint64_t steps = 2 * walked + uint64_t(push.chunk) * (1 + walked);
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)},
                                    {"FN", uint32_t(fn)},
                                    {"FOLD", uint32_t(fold)},
                                    {"ACCUMULATE", w == Write::Accumulate},
                                    {"SPLIT", parts > 1}};
  // A u32 condition is bound as f32 words (the kernel reads its bits); so are the unused
  // bindings that repeat it.
  const DType x_format = takesCondition(fn) ? DType::F32 : x.dtype;
  const vk::Kernel& kernel = floatKernel(ctx, "map_reduce/map_reduce", constants,
                                         {{"x_dtype", x_format},
                                          {"y_dtype", inputs.size() > 1 ? y.dtype : x_format},
                                          {"z_dtype", inputs.size() > 2 ? z.dtype : x_format},
                                          {"result_dtype", out.dtype}});
  const vk::Arg args[] = {bx.arg, by.arg, bz.arg, bo.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     itemGroups(ctx, uint64_t(n_out * parts), workgroupSize(ctx), steps));
}

}  // namespace

const char* mapFnName(MapFn fn) {
  switch (fn) {
    case MapFn::X:
      return "x";
    case MapFn::Add:
      return "add";
    case MapFn::Sub:
      return "sub";
    case MapFn::Mul:
      return "mul";
    case MapFn::Div:
      return "div";
    case MapFn::Max:
      return "max";
    case MapFn::Min:
      return "min";
    case MapFn::Where:
      return "where";
    case MapFn::MaskTrue:
      return "mask_true";
    case MapFn::MaskFalse:
      return "mask_false";
    case MapFn::DivGradB:
      return "div_grad_b";
    case MapFn::SelectEqual:
      return "select_equal";
  }
  return "?";
}

int mapFnInputs(MapFn fn) {
  switch (fn) {
    case MapFn::X:
      return 1;
    case MapFn::Where:
    case MapFn::DivGradB:
    case MapFn::SelectEqual:
      return 3;
    default:
      return 2;
  }
}

Shape broadcastShape(const char* op, const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  int64_t dims[kRank];
  for (int i = 0; i < rank; ++i) {
    const int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw ShapeError(std::string(op) + ": " + a.str() + " and " + b.str() +
                       " do not broadcast (axis " + std::to_string(i) + ": " + std::to_string(da) +
                       " vs " + std::to_string(db) + ")");
    dims[i] = da == 1 ? db : da;
  }
  return Shape::of(dims, rank);
}

int64_t mapReduceScratch(const Shape& space, uint32_t axes) {
  const int64_t n_out = reducedShape(space, axes, false).numel();
  if (n_out == 0) return 0;
  int64_t elements = 0;
  // Each level writes (n_out, parts) partials that the next level folds.
  for (int64_t parts = foldParts(space.numel() / n_out); parts > 1; parts = foldParts(parts))
    elements += n_out * parts;
  return elements;
}

Shape reducedShape(const Shape& space, uint32_t axes, bool keep_dims) {
  int64_t dims[kRank];
  int rank = 0;
  for (int a = 0; a < space.rank(); ++a) {
    if (!(axes >> a & 1u))
      dims[rank++] = space[a];
    else if (keep_dims)
      dims[rank++] = 1;
  }
  if (rank == 0) dims[rank++] = 1;
  return Shape::of(dims, rank);
}

void mapReduce(vk::Recorder& rec, MapFn fn, Fold fold, std::span<const TensorView> inputs,
               const Shape& space, uint32_t axes, const TensorView& out, float alpha, Write w,
               const TensorView& scratch) {
  const char* op = mapFnName(fn);
  const std::string shapes = describe(op, inputs, space, out);
  if (int(inputs.size()) != mapFnInputs(fn))
    throw ShapeError(shapes + ": takes " + std::to_string(mapFnInputs(fn)) + " inputs");
  if (space.rank() < 1 || axes >> space.rank() != 0)
    throw ShapeError(shapes + ": reduced axes outside the space");
  const int64_t n_out = reducedShape(space, axes, false).numel();
  if (out.shape.numel() != n_out)
    throw ShapeError(shapes + ": out needs " + std::to_string(n_out) + " elements");
  if (space.numel() >= (int64_t(1) << 31)) throw ShapeError(shapes + ": 2^31 elements or more");
  const int64_t n_scratch = mapReduceScratch(space, axes);
  if (n_scratch > 0) {
    if (scratch.shape.numel() < n_scratch)
      throw ShapeError(shapes + ": folds " + std::to_string(space.numel() / n_out) +
                       " elements into each output, in parts: needs a scratch of " +
                       std::to_string(n_scratch) + " f32 (ops::mapReduceScratch), got " +
                       std::to_string(scratch.shape.numel()));
    checkFits(op, "scratch", scratch);
  }

  for (size_t t = 0; t < inputs.size(); ++t) {
    const TensorView& in = inputs[t];
    const char* name = t == 0 ? "x" : t == 1 ? "y" : "z";
    if (t == 0 && takesCondition(fn))
      checkFits(op, name, in, DType::U32);
    else
      checkFloatOperand(op, name, in);
    // Right-aligned against the space: a missing or size-1 axis is read with stride 0.
    if (in.shape.rank() > space.rank() || broadcastShape(op, in.shape, space) != space)
      throw ShapeError(shapes + ": " + name + " does not broadcast to the space");
  }
  checkFloatOperand(op, "out", out);
  for (size_t t = 0; t < inputs.size(); ++t) {
    // In place only where every output element reads its own input element once, first.
    const bool same = axes == 0 && inputs[t].shape.numel() == out.shape.numel() &&
                      !(t == 0 && takesCondition(fn));
    checkAlias(op, "out", out, t == 0 ? "x" : t == 1 ? "y" : "z", inputs[t], same);
    if (same) checkInPlaceDtype(op, "out", out, "an input", inputs[t]);
    if (n_scratch > 0)
      checkAlias(op, "scratch", scratch, t == 0 ? "x" : t == 1 ? "y" : "z", inputs[t], false);
  }
  if (n_scratch > 0) checkAlias(op, "scratch", scratch, "out", out, false);
  if (n_out == 0) return;

  // A long fold: partial folds into the scratch's first n_out * parts floats, then those
  // folded (again in parts if there are still too many) into out.
  const int64_t n_fold = space.numel() / n_out, parts = foldParts(n_fold);
  if (parts > 1) {
    const TensorView partials{scratch.buffer, scratch.offset, Shape{n_out, parts}, DType::F32};
    recordFold(rec, fn, fold, inputs, space, axes, partials, 1.0f, Write::Overwrite, parts);
    const Shape rest{scratch.shape.numel() - n_out * parts};
    const TensorView more{scratch.buffer, scratch.offset + uint64_t(n_out * parts) * 4,
                          rest.numel() > 0 ? rest : Shape{0}, DType::F32};
    const TensorView level[] = {partials};
    mapReduce(rec, MapFn::X, fold, level, partials.shape, 0b10, out, alpha, w, more);
    return;
  }
  recordFold(rec, fn, fold, inputs, space, axes, out, alpha, w, 1);
}

void binary(vk::Recorder& rec, MapFn fn, const TensorView& a, const TensorView& b,
            const TensorView& out, Write w) {
  const Shape space = broadcastShape(mapFnName(fn), a.shape, b.shape);
  if (out.shape != space)
    throw ShapeError(std::string(mapFnName(fn)) + ": " + a.shape.str() + ", " + b.shape.str() +
                     " -> " + out.shape.str() + ": out must be " + space.str());
  const TensorView inputs[] = {a, b};
  mapReduce(rec, fn, Fold::Sum, inputs, space, 0, out, 1.0f, w);
}

void reduce(vk::Recorder& rec, Fold fold, const TensorView& x, uint32_t axes, const TensorView& out,
            float alpha, Write w, const TensorView& scratch) {
  const TensorView inputs[] = {x};
  mapReduce(rec, MapFn::X, fold, inputs, x.shape, axes, out, alpha, w, scratch);
}

}  // namespace vkgrad::ops
