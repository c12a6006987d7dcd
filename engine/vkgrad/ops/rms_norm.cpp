#include "vkgrad/ops/rms_norm.h"

#include <algorithm>
#include <cmath>
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

struct ForwardPush {
  uint32_t rows, n;
  float eps;                                       // added to the mean square
  uint32_t x_skip, gamma_skip, y_skip, rstd_skip;  // first elements inside the bindings
};
static_assert(sizeof(ForwardPush) == 28);

struct BackwardPush {
  uint32_t rows, n;
  uint32_t x_skip, gamma_skip, rstd_skip, dy_skip, dx_skip;
};
static_assert(sizeof(BackwardPush) == 28);

struct ParamsPush {
  uint32_t rows, n;
  uint32_t block_rows, blocks;  // rows per block; ceil(rows / block_rows)
  uint32_t x_skip, dy_skip, rstd_skip, out_skip;
};
static_assert(sizeof(ParamsPush) == 32);

// The layer_norm/backward_reduce.comp push constants (the column sum over block partials).
struct ReducePush {
  uint32_t n, blocks;
  uint32_t gamma_partials, beta_partials;
  uint32_t dgamma_skip, dbeta_skip;
};
static_assert(sizeof(ReducePush) == 24);

// As layer norm (ops/layer_norm.cpp, measured there): rows up to this long get one
// invocation each, longer ones a workgroup of 128.
int64_t rowPerInvocationMaxN(const vk::Context& context) {
  return context.info().isCpu() ? 64 : 32;
}
constexpr uint32_t kRowPerInvocationGroup = 64;
constexpr uint32_t kWorkgroupPerRow = 128;
constexpr uint32_t kColumnGroup = 64;
// dgamma's partial sums per block of rows; lavapipe ends an invocation after 65535 loop
// iterations, so the sum over blocks stays at 16384 blocks (2^20 rows) on CPU devices.
constexpr int64_t kBlockRows = 64;
constexpr int64_t kMaxBlocksOnCpu = 16384;

struct RowLayout {
  uint32_t group;
  bool row_per_invocation;
  bool one_subgroup;  // a workgroup of one subgroup: no shared memory, no barriers
  uint32_t groups;
};
// On CPU devices a longer row gets one subgroup (a workgroup of subgroupSize invocations,
// which they run as one subgroup): a shader with barriers runs its invocations as coroutines
// there, so this is ~10x faster on lavapipe at 512 x 576 (as layer norm's SubgroupStorage).
RowLayout rowLayout(const vk::Context& context, const Shape& x) {
  const bool per_invocation = x.back() <= rowPerInvocationMaxN(context);
  const bool one_subgroup = !per_invocation && context.info().isCpu();
  const uint32_t group = per_invocation ? kRowPerInvocationGroup
                         : one_subgroup ? std::max(1u, context.info().subgroup_size)
                                        : kWorkgroupPerRow;
  const uint32_t rows = uint32_t(x.rows());
  // The shaders grid-stride over rows, so the grid may be capped at the device limit.
  const uint32_t groups = std::min(per_invocation ? vk::divUp(rows, group) : rows,
                                   context.info().max_workgroup_count[0]);
  return {group, per_invocation, one_subgroup, groups};
}

void checkLike(const std::string& op, const char* name, const TensorView& t, const Shape& s) {
  if (!(t.shape == s))
    throw ShapeError(op + " needs " + name + " " + s.str() + ", got " + t.shape.str());
}

void checkRange(const vk::Context& context, const std::string& op, const TensorView& x) {
  const uint64_t range = context.info().max_storage_buffer_range;
  if (bindStorage(context, x).arg.bytes > range)
    throw ShapeError(op + ": " + std::to_string(x.bytes()) +
                     " bytes exceed the device's maxStorageBufferRange (" + std::to_string(range) +
                     ")");
}

int64_t blocksOf(int64_t rows) {
  return (rows + kBlockRows - 1) / kBlockRows;
}

}  // namespace

Shape rmsNormStatsShape(const Shape& x, const Shape& gamma, float eps) {
  const std::string op = "rmsNorm: x " + x.str();
  if (x.rank() < 1) throw ShapeError(op + " needs at least one dim");
  if (x.numel() == 0) throw ShapeError(op + " is empty");
  if (x.back() > UINT32_MAX || x.rows() > UINT32_MAX)
    throw ShapeError(op + ": rows and N must fit 32 bits");
  if (!(gamma == Shape{x.back()}))
    throw ShapeError(op + " needs gamma (" + std::to_string(x.back()) + "), got " + gamma.str());
  if (!(eps >= 0.0f) || !std::isfinite(eps))
    throw ShapeError(op + ": eps must be finite and >= 0, got " + std::to_string(eps));
  return {x.rows()};
}

void rmsNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma, const TensorView& y,
             const TensorView& rstd, float eps) {
  vk::Context& context = rec.context();
  const Shape stats = rmsNormStatsShape(x.shape, gamma.shape, eps);
  const std::string op = "rmsNorm: x " + x.shape.str();
  checkLike(op, "y", y, x.shape);
  checkLike(op, "rstd", rstd, stats);
  for (const auto& [name, t] : {std::pair{"x", &x}, std::pair{"gamma", &gamma}, std::pair{"y", &y},
                                std::pair{"rstd", &rstd}})
    checkFloat("rmsNorm", name, *t);
  if (y.dtype != x.dtype && overlaps(y, x))
    throw ShapeError(op + ": y in place of x needs x's dtype");
  checkAlias("rmsNorm", "y", y, "x", x, true);
  checkRange(context, op, x);
  const RowLayout layout = rowLayout(context, x.shape);
  const Bound bx = bindStorage(context, x), bgamma = bindStorage(context, gamma),
              by = bindStorage(context, y), brstd = bindStorage(context, rstd);
  const ForwardPush push{uint32_t(x.shape.rows()),
                         uint32_t(x.shape.back()),
                         eps,
                         bx.skip,
                         bgamma.skip,
                         by.skip,
                         brstd.skip};
  const vk::Kernel& kernel = floatKernel(context, "rms_norm/forward",
                                         {{"local_size_x", layout.group},
                                          {"kRowPerInvocation", layout.row_per_invocation},
                                          {"kOneSubgroup", layout.one_subgroup}},
                                         {{"x_dtype", x.dtype},
                                          {"gamma_dtype", gamma.dtype},
                                          {"y_dtype", y.dtype},
                                          {"rstd_out_dtype", rstd.dtype}});
  const vk::Arg args[] = {bx.arg, bgamma.arg, by.arg, brstd.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), layout.groups);
}

int64_t rmsNormBackwardScratch(int64_t rows, int64_t n) {
  return blocksOf(rows) * n;
}

namespace {

// rmsNormBackward's checks, all before anything is recorded.
void checkBackward(const vk::Context& context, const TensorView& x, const TensorView& gamma,
                   const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                   const TensorView& dgamma, const TensorView& scratch) {
  const Shape stats = rmsNormStatsShape(x.shape, gamma.shape, 0.0f);
  const std::string op = "rmsNormBackward: x " + x.shape.str();
  checkLike(op, "dy", dy, x.shape);
  checkLike(op, "rstd", rstd, stats);
  for (const auto& [name, t] : {std::pair{"x", &x}, std::pair{"gamma", &gamma},
                                std::pair{"rstd", &rstd}, std::pair{"dy", &dy}})
    checkFloat("rmsNormBackward", name, *t);
  const int64_t blocks = blocksOf(x.shape.rows()), n = x.shape.back();
  if (dx.buffer != nullptr) {
    checkLike(op, "dx", dx, x.shape);
    checkFloat("rmsNormBackward", "dx", dx);
    for (const auto& [name, t] : {std::pair{"x", &x}, std::pair{"gamma", &gamma},
                                  std::pair{"rstd", &rstd}, std::pair{"dy", &dy}})
      checkAlias("rmsNormBackward", "dx", dx, name, *t, false);
  }
  if (dgamma.buffer != nullptr) {
    checkLike(op, "dgamma", dgamma, gamma.shape);
    checkFloat("rmsNormBackward", "dgamma", dgamma);
    for (const auto& [name, t] :
         {std::pair{"x", &x}, std::pair{"rstd", &rstd}, std::pair{"dy", &dy}, std::pair{"dx", &dx}})
      checkAlias("rmsNormBackward", "dgamma", dgamma, name, *t, false);
    if (context.info().isCpu() && blocks > kMaxBlocksOnCpu)
      throw ShapeError(op + ": dgamma over more than " +
                       std::to_string(kMaxBlocksOnCpu * kBlockRows) +
                       " rows exceeds a CPU device's loop limit");
    if (blocks > 1) {
      if (scratch.shape.numel() < blocks * n || scratch.dtype != DType::F32)
        throw ShapeError(op + " needs an f32 scratch of " + std::to_string(blocks * n) +
                         " elements, got " + scratch.shape.str() + " " + dtypeName(scratch.dtype));
      checkOperand("rmsNormBackward", "scratch", scratch);
    }
  }
  checkRange(context, op, x);
}

void recordDx(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
              const TensorView& rstd, const TensorView& dy, const TensorView& dx, Write dx_write) {
  vk::Context& context = rec.context();
  const RowLayout layout = rowLayout(context, x.shape);
  // x, gamma, rstd, dy and dx: within 4 storage buffers the ".sb4" build reads gamma and
  // rstd through texel views.
  const bool four = fewerStorageBuffers(context, 5);
  const bool s16 = x.dtype != DType::F32 || gamma.dtype != DType::F32 || rstd.dtype != DType::F32 ||
                   dy.dtype != DType::F32 || dx.dtype != DType::F32;
  const std::string op = "rmsNormBackward: x " + x.shape.str();
  const Bound bx = bindStorage(context, x),
              bgamma = bindInput(context, gamma, four, s16, op.c_str(), "gamma"),
              brstd = bindInput(context, rstd, four, s16, op.c_str(), "rstd"),
              bdy = bindStorage(context, dy), bdx = bindStorage(context, dx);
  const uint32_t rows = uint32_t(x.shape.rows()), n = uint32_t(x.shape.back());
  const BackwardPush push{rows, n, bx.skip, bgamma.skip, brstd.skip, bdy.skip, bdx.skip};
  const vk::Kernel& kernel =
      floatKernel(context, four ? "rms_norm/backward.sb4" : "rms_norm/backward",
                  {{"local_size_x", layout.group},
                   {"kRowPerInvocation", layout.row_per_invocation},
                   {"kOneSubgroup", layout.one_subgroup},
                   {"kAccumulate", dx_write == Write::Accumulate}},
                  {{"x_dtype", x.dtype},
                   {"gamma_dtype", gamma.dtype},
                   {"rstd_dtype", rstd.dtype},
                   {"dy_dtype", dy.dtype},
                   {"dx_dtype", dx.dtype}});
  const vk::Arg args[] = {bx.arg, bgamma.arg, brstd.arg, bdy.arg, bdx.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), layout.groups);
}

// One block: the column sums go straight to dgamma; several: partials into scratch, then
// layer norm's column sum over blocks (the same reduction, there for dgamma and dbeta).
void recordDgamma(vk::Recorder& rec, const TensorView& x, const TensorView& rstd,
                  const TensorView& dy, const TensorView& dgamma, const TensorView& scratch,
                  Write dgamma_write) {
  vk::Context& context = rec.context();
  const int64_t rows = x.shape.rows(), n = x.shape.back();
  const int64_t blocks = blocksOf(rows);
  const bool direct = blocks == 1;
  const TensorView& out = direct ? dgamma : scratch;
  const bool accumulate = dgamma_write == Write::Accumulate;
  const Bound bx = bindStorage(context, x), bdy = bindStorage(context, dy),
              brstd = bindStorage(context, rstd), bout = bindStorage(context, out);
  const ParamsPush push{uint32_t(rows), uint32_t(n), uint32_t(kBlockRows), uint32_t(blocks),
                        bx.skip,        bdy.skip,    brstd.skip,           bout.skip};
  const vk::Kernel& kernel =
      floatKernel(context, "rms_norm/backward_params",
                  {{"local_size_x", kColumnGroup}, {"kAccumulate", direct && accumulate}},
                  {{"x_dtype", x.dtype},
                   {"dy_dtype", dy.dtype},
                   {"rstd_dtype", rstd.dtype},
                   {"out_gamma_dtype", out.dtype}});
  const vk::Arg args[] = {bx.arg, bdy.arg, brstd.arg, bout.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(uint64_t(n), kColumnGroup),
                     uint32_t(std::min<int64_t>(blocks, context.info().max_workgroup_count[1])));
  if (direct) return;
  const Bound bdgamma = bindStorage(context, dgamma);
  // dbeta is not wanted (kBeta false): its binding repeats dgamma's and is never written.
  const ReducePush reduce{uint32_t(n), uint32_t(blocks), bout.skip,
                          bout.skip,   bdgamma.skip,     bdgamma.skip};
  const vk::Kernel& reducer =
      floatKernel(context, "layer_norm/backward_reduce",
                  {{"local_size_x", kColumnGroup},
                   {"kAccumulate", accumulate},
                   {"kGamma", true},
                   {"kBeta", false}},
                  {{"dgamma_dtype", dgamma.dtype}, {"dbeta_dtype", dgamma.dtype}});
  const vk::Arg reduce_args[] = {bout.arg, bdgamma.arg, bdgamma.arg};
  rec.dispatchGroups(reducer, reduce_args, &reduce, sizeof(reduce),
                     gridGroups(context, uint64_t(n), kColumnGroup));
}

}  // namespace

void rmsNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                     const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                     const TensorView& dgamma, const TensorView& scratch, Write dx_write,
                     Write dgamma_write) {
  checkBackward(rec.context(), x, gamma, rstd, dy, dx, dgamma, scratch);
  if (dx.buffer != nullptr) recordDx(rec, x, gamma, rstd, dy, dx, dx_write);
  if (dgamma.buffer != nullptr) recordDgamma(rec, x, rstd, dy, dgamma, scratch, dgamma_write);
}

}  // namespace vkgrad::ops
