#include "vkgrad/ops/reduce.h"

#include <algorithm>
#include <bit>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr uint32_t kMaxWorkgroup = 1024;  // the largest workgroup a loop budget may need
// Loads each lane should have in sequence before more lanes share an output: below that the
// shared-memory tree (log2(lanes) barriers) outweighs what it splits.
constexpr uint64_t kLoadsPerLane = 16;
// Adjacent outputs a workgroup takes at least in COLUMN mode on a GPU, so that neighbouring
// invocations load neighbouring addresses.
constexpr uint64_t kMinColumnOutputs = 8;

struct Launch {
  uint32_t lanes;      // invocations that share one output
  uint32_t workgroup;  // invocations per workgroup, a multiple of lanes
};

// On a GPU: enough lanes per output to keep each busy with at least kLoadsPerLane loads. On
// a CPU (lavapipe runs a workgroup on one thread, a subgroup as one SIMD vector, and every
// barrier switches between all of a workgroup's subgroups) one lane summing a whole output
// is fastest: on (1024,1024) it measured 4x faster than 16 lanes and a tree. There lanes
// split an output only when there are too few outputs to fill a SIMD vector, or when one
// lane would loop more than kCpuLaneSteps times (llvmpipe's loop budget, ops/binding.h).
Launch launchFor(const char* op, const vk::DeviceInfo& info, bool column, uint64_t outer,
                 uint64_t kept, uint64_t inner) {
  const uint64_t steps = column ? outer : outer * inner;  // one lane's loop, if it were alone
  if (column && !info.isCpu()) {
    // Column sums of a tall matrix (a bias gradient over 100,000 rows) have few outputs, so
    // the lanes per output decide the time: up to the device's largest workgroup (1024 on an
    // H200) of kMinColumnOutputs adjacent outputs (BENCHMARKS.md, the GNN on the GPU).
    const uint64_t limit =
        std::bit_floor(std::min<uint64_t>(kMaxWorkgroup, info.max_workgroup_invocations));
    const uint64_t outs = std::min(std::bit_ceil(kept), kMinColumnOutputs);
    const uint64_t lanes =
        std::bit_floor(std::clamp<uint64_t>(steps / kLoadsPerLane, 1, limit / outs));
    return {uint32_t(lanes), uint32_t(std::max<uint64_t>(workgroupSize(info), lanes * outs))};
  }
  const uint64_t wanted = std::clamp<uint64_t>(steps / kLoadsPerLane, 1, workgroupSize(info));
  uint64_t lanes;
  if (info.isCpu()) {
    const uint64_t simd = std::max<uint32_t>(info.subgroup_size, 1);
    lanes = column || kept >= simd ? 1 : std::bit_floor(std::min(wanted, simd));
    lanes = std::max(lanes, std::bit_ceil((steps + kCpuLaneSteps - 1) / kCpuLaneSteps));
  } else {
    lanes = std::bit_floor(wanted);
  }
  if (lanes > std::min<uint64_t>(kMaxWorkgroup, info.max_workgroup_invocations))
    throw ShapeError(std::string(op) + ": " + std::to_string(steps) +
                     " fetches per output are more than one workgroup can loop over on " +
                     info.name);
  return {uint32_t(lanes), std::max(workgroupSize(info), uint32_t(lanes))};
}

struct SumPush {
  uint32_t outer, kept, inner;  // the view, in fetched units (texels on an RGBA32F axis)
  float alpha;
  uint32_t x_skip, y_skip;  // first fetched units inside the bindings
  uint32_t out_skip;        // first element inside the out binding
};
static_assert(sizeof(SumPush) == 28);

std::string str(KeptAxis f) {
  return "(" + std::to_string(f.outer) + "," + std::to_string(f.kept) + "," +
         std::to_string(f.inner) + ")";
}

int64_t leadingNumel(const Shape& s) {
  int64_t n = 1;
  for (int i = 0; i + 1 < s.rank(); ++i) n *= s[i];
  return n;
}

// out is x's shape without its last axis, or with it set to 1.
bool isLastAxisReduced(const Shape& x, const Shape& out) {
  const int r = x.rank();
  if (out.rank() != r - 1 && !(out.rank() == r && out[r - 1] == 1)) return false;
  for (int i = 0; i + 1 < r; ++i)
    if (out[i] != x[i]) return false;
  return true;
}

// out is (N), (1,N), (1,1,N), ...
bool isRowsReduced(const Shape& x, const Shape& out) {
  if (out.rank() < 1 || out.back() != x.back()) return false;
  for (int i = 0; i + 1 < out.rank(); ++i)
    if (out[i] != 1) return false;
  return true;
}

void checkHasAxis(const char* op, const char* name, const TensorView& t) {
  if (t.shape.rank() < 1)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() +
                     " has no axis to reduce");
}

// x: (...,N) -> out: (...), scaled by alpha.
void lastAxis(vk::Recorder& rec, const char* op, const TensorView& x, const TensorView& out,
              bool mean, Write w) {
  checkHasAxis(op, "x", x);
  if (!isLastAxisReduced(x.shape, out.shape))
    throw ShapeError(std::string(op) + ": x " + x.shape.str() + " -> out " + out.shape.str() +
                     ": out must be x's shape without its last axis");
  const int64_t n = x.shape.back();
  if (n == 0 && leadingNumel(x.shape) > 0)
    throw ShapeError(std::string(op) + ": x " + x.shape.str() + ": empty reduction");
  sumOverKeptAxis(rec, op, x, nullptr, out, {1, leadingNumel(x.shape), n},
                  mean ? 1.0f / float(n) : 1.0f, w);
}

// x: (...,N) -> out: (N), scaled by alpha.
void rows(vk::Recorder& rec, const char* op, const TensorView& x, const TensorView& out, bool mean,
          Write w) {
  checkHasAxis(op, "x", x);
  if (!isRowsReduced(x.shape, out.shape))
    throw ShapeError(std::string(op) + ": x " + x.shape.str() + " -> out " + out.shape.str() +
                     ": out must be (N) with N = x's last axis");
  const int64_t r = leadingNumel(x.shape);
  if (r == 0 && x.shape.back() > 0)
    throw ShapeError(std::string(op) + ": x " + x.shape.str() + ": empty reduction");
  sumOverKeptAxis(rec, op, x, nullptr, out, {r, x.shape.back(), 1}, mean ? 1.0f / float(r) : 1.0f,
                  w);
}

void lastAxisBackward(vk::Recorder& rec, const char* op, const TensorView& dout,
                      const TensorView& dx, bool mean, Write w) {
  checkHasAxis(op, "dx", dx);
  if (!isLastAxisReduced(dx.shape, dout.shape))
    throw ShapeError(std::string(op) + ": dout " + dout.shape.str() + " -> dx " + dx.shape.str() +
                     ": dout must be dx's shape without its last axis");
  checkFloatOperand(op, "dout", dout);
  checkFloatOperand(op, "dx", dx);
  checkAlias(op, "dx", dx, "dout", dout, false);
  const int64_t n = dx.shape.back();
  broadcast(rec, dout, dx, {1, leadingNumel(dx.shape), n}, mean ? 1.0f / float(n) : 1.0f, w);
}

void rowsBackward(vk::Recorder& rec, const char* op, const TensorView& dout, const TensorView& dx,
                  bool mean, Write w) {
  checkHasAxis(op, "dx", dx);
  if (!isRowsReduced(dx.shape, dout.shape))
    throw ShapeError(std::string(op) + ": dout " + dout.shape.str() + " -> dx " + dx.shape.str() +
                     ": dout must be (N) with N = dx's last axis");
  checkFloatOperand(op, "dout", dout);
  checkFloatOperand(op, "dx", dx);
  checkAlias(op, "dx", dx, "dout", dout, false);
  const int64_t r = leadingNumel(dx.shape);
  broadcast(rec, dout, dx, {r, dx.shape.back(), 1}, mean ? 1.0f / float(r) : 1.0f, w);
}

}  // namespace

void sumOverKeptAxis(vk::Recorder& rec, const char* op, const TensorView& x, const TensorView* y,
                     const TensorView& out, KeptAxis f, float alpha, Write w,
                     ReduceVariant variant) {
  checkFloatOperand(op, "x", x);
  if (y) checkFloatOperand(op, "y", *y);
  checkFloatOperand(op, "out", out);
  if (x.shape.numel() != f.numel() || (y && y->shape.numel() != f.numel()) ||
      out.shape.numel() != f.kept)
    throw ShapeError(std::string(op) + ": x " + x.shape.str() + " -> out " + out.shape.str() +
                     " does not match the view " + str(f));
  checkAlias(op, "out", out, "x", x, false);
  if (y) checkAlias(op, "out", out, "y", *y, false);
  if (f.kept == 0) return;
  if (f.outer * f.inner == 0) throw ShapeError(std::string(op) + ": empty reduction " + str(f));

  vk::Context& ctx = rec.context();
  // One output: the whole input is a single contiguous run.
  if (f.kept == 1) f = {1, 1, f.outer * f.inner};
  const bool column = f.inner == 1 && f.outer > 1;
  const int64_t run = column ? f.kept : f.inner;  // the contiguous axis
  // The texel kernel reads f32 (texelFits refuses 16-bit views) and writes an f32 out.
  const auto fits = [&](vk::TexelFormat format) {
    return texelFits(ctx, x, format) && (!y || texelFits(ctx, *y, format));
  };
  const bool f32 =
      x.dtype == DType::F32 && (!y || y->dtype == DType::F32) && out.dtype == DType::F32;
  bool texel = variant != ReduceVariant::Storage && f32 && fits(vk::TexelFormat::R32f);
  if (variant == ReduceVariant::Texel && !texel)
    throw Error(std::string(op) + ": x " + x.shape.str() +
                (f32 ? " does not fit the device's texel-buffer limits"
                     : ": the texel variant reads and writes f32 only"));
  const bool vec4 = texel && run % 4 == 0 && fits(vk::TexelFormat::Rgba32f);
  const vk::TexelFormat format = vec4 ? vk::TexelFormat::Rgba32f : vk::TexelFormat::R32f;
  const auto bind = [&](const TensorView& t) {
    return texel ? bindTexel(ctx, t, format) : bindStorage(ctx, t);
  };
  const auto bx = bind(x), by = bind(y ? *y : x), bout = bindStorage(ctx, out);
  const uint32_t unit = vec4 ? 4 : 1;
  SumPush push{uint32_t(f.outer), uint32_t(f.kept), uint32_t(f.inner), alpha,
               bx.skip / unit,    by.skip / unit,   bout.skip};
  if (vec4) (column ? push.kept : push.inner) /= 4;

  const Launch launch = launchFor(op, ctx.info(), column, push.outer, push.kept, push.inner);
  const vk::SpecConstants constants{{"local_size_x", launch.workgroup},
                                    {"LANES", launch.lanes},
                                    {"COLUMN", column},
                                    {"PRODUCT", y != nullptr},
                                    {"ACCUMULATE", w == Write::Accumulate},
                                    {"VEC4", vec4}};
  // Without y its binding is x's, so it takes x's format.
  const vk::Kernel& kernel = texel ? ctx.kernels().get("reduce/sum_texel", constants)
                                   : floatKernel(ctx, "reduce/sum", constants,
                                                 {{"x_dtype", x.dtype},
                                                  {"y_dtype", y ? y->dtype : x.dtype},
                                                  {"result_dtype", out.dtype}});
  const vk::Arg args[] = {bx.arg, by.arg, bout.arg};
  const uint32_t outs_per_group = launch.workgroup / launch.lanes;
  const uint64_t blocks = (push.kept + outs_per_group - 1) / outs_per_group;
  // One block per workgroup where the device allows; beyond that a workgroup loops.
  const uint32_t groups = uint32_t(std::min<uint64_t>(blocks, ctx.info().max_workgroup_count[0]));
  rec.dispatchGroups(kernel, args, &push, sizeof(push), groups);
}

void sumLastAxis(vk::Recorder& rec, const TensorView& x, const TensorView& out, Write w) {
  lastAxis(rec, "sumLastAxis", x, out, false, w);
}

void meanLastAxis(vk::Recorder& rec, const TensorView& x, const TensorView& out, Write w) {
  lastAxis(rec, "meanLastAxis", x, out, true, w);
}

void sumLastAxisBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx, Write w) {
  lastAxisBackward(rec, "sumLastAxisBackward", dout, dx, false, w);
}

void meanLastAxisBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                          Write w) {
  lastAxisBackward(rec, "meanLastAxisBackward", dout, dx, true, w);
}

void sumRows(vk::Recorder& rec, const TensorView& x, const TensorView& out, Write w) {
  rows(rec, "sumRows", x, out, false, w);
}

void meanRows(vk::Recorder& rec, const TensorView& x, const TensorView& out, Write w) {
  rows(rec, "meanRows", x, out, true, w);
}

void sumRowsBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx, Write w) {
  rowsBackward(rec, "sumRowsBackward", dout, dx, false, w);
}

void meanRowsBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx, Write w) {
  rowsBackward(rec, "meanRowsBackward", dout, dx, true, w);
}

}  // namespace vkgrad::ops
