#include "vkgrad/ops/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct LayerNormPush {
  uint32_t rows;  // numel / n
  uint32_t n;     // length of the last axis
  float eps;      // added to the variance
  // First element of each view inside its binding (ops/binding.h).
  uint32_t x_skip, gamma_skip, beta_skip, y_skip, mean_skip, rstd_skip;
};
static_assert(sizeof(LayerNormPush) == 36);

struct BackwardPush {
  uint32_t rows, n;
  uint32_t x_skip, dy_skip, gamma_skip, mean_skip, rstd_skip, dx_skip, addend_skip;
  uint32_t block_rows, blocks, gamma_first, beta_first;  // WithDx's partial sums
};
static_assert(sizeof(BackwardPush) == 52);

struct ParamsPush {
  uint32_t rows, n;
  uint32_t block_rows, blocks;  // rows per block; ceil(rows / block_rows)
  uint32_t x_skip, dy_skip, mean_skip, rstd_skip;
  uint32_t gamma_skip, beta_skip;  // where block 0 of each output starts in its binding
};
static_assert(sizeof(ParamsPush) == 40);

struct ReducePush {
  uint32_t n, blocks;
  uint32_t gamma_partials, beta_partials;  // elements into the scratch binding
  uint32_t dgamma_skip, dbeta_skip;
};
static_assert(sizeof(ReducePush) == 24);

// Rows up to this long get one invocation each (measured on lavapipe as for softmax: at
// N <= 64 1.3-3x faster than a subgroup per row). Per-invocation loads do not coalesce on
// GPUs, so the limit is lower there.
int64_t rowPerInvocationMaxN(const vk::Context& context) {
  return context.info().isCpu() ? 64 : 32;
}
constexpr uint32_t kRowPerInvocationGroup = 64;
constexpr uint32_t kWorkgroupPerRow = 128;
// Invocations per workgroup of the column kernels. CPU drivers run whole workgroups on a few
// threads, so Columns at N = 768 (192 vec4 invocations) would be 3 workgroups of 64 for 2
// threads; one subgroup per workgroup keeps them balanced.
uint32_t columnGroup(const vk::Context& context) {
  return context.info().isCpu() ? std::max(1u, context.info().subgroup_size) : 64;
}
// Rows per block of the Blocked parameter gradients: each block writes 2N partials, so
// scratch is 2N * rows / 64; on GPUs rows / 64 blocks of N columns fill the device.
constexpr int64_t kBlockRows = 64;
// Columns loops over every row in one invocation; lavapipe ends an invocation after 65535
// loop iterations (LP_MAX_TGSI_LOOP_ITERATIONS), so CPU devices stay well below that.
constexpr int64_t kColumnsMaxRowsOnCpu = 16384;
// WithDx holds each lane's vec4 columns of a row in registers: up to 4 * 8 * 8 = 256 columns
// on an 8-wide CPU device.
constexpr uint32_t kWithDxMaxLaneVec4s = 8;

constexpr vk::TexelFormat kR32f = vk::TexelFormat::R32f;
constexpr vk::TexelFormat kRgba32f = vk::TexelFormat::Rgba32f;

bool fitsTexels(const vk::Context& context, const TensorView& t) {
  return texelFits(context, t, kR32f);
}
// t's texel binding when the kernel reads texels, else a one-texel placeholder that keeps the
// binding valid.
vk::Arg texelArg(const vk::Context& context, const TensorView& t, bool used,
                 vk::TexelFormat format = kR32f) {
  vk::Arg arg = bindTexel(context, t, format).arg;
  if (!used) arg.bytes = vk::texelBytes(format);
  return arg;
}

bool usesTexels(LayerNormVariant v) {
  return v == LayerNormVariant::WorkgroupTexel || v == LayerNormVariant::SubgroupTexel;
}

// (rows) or x's shape without its last dim.
bool isRowShape(const Shape& s, const Shape& x) {
  if (s.rank() == 1 && s[0] == x.rows()) return true;
  if (s.rank() != x.rank() - 1) return false;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] != x[i]) return false;
  return true;
}

// op: "layerNorm: x (4,7)", the prefix of every message.
std::string checkX(const char* name, const TensorView& x) {
  const std::string op = std::string(name) + ": x " + x.shape.str();
  if (x.shape.rank() < 1) throw ShapeError(op + " needs at least one dim");
  if (x.shape.numel() == 0) throw ShapeError(op + " is empty");
  if (x.shape.back() > UINT32_MAX || x.shape.rows() > UINT32_MAX)
    throw ShapeError(op + ": rows and N must fit 32 bits");
  return op;
}
void checkVector(const std::string& op, const char* name, const TensorView& t, int64_t n) {
  if (!(t.shape == Shape{n}))
    throw ShapeError(op + " needs " + name + " (" + std::to_string(n) + "), got " + t.shape.str());
}
void checkLikeX(const std::string& op, const char* name, const TensorView& t, const Shape& x) {
  if (!(t.shape == x))
    throw ShapeError(op + " needs " + name + " shaped like x, got " + t.shape.str());
}
void checkStats(const std::string& op, const char* name, const TensorView& t, const Shape& x) {
  if (!isRowShape(t.shape, x))
    throw ShapeError(op + " needs " + name + " (" + std::to_string(x.rows()) + "), got " +
                     t.shape.str());
}
// Bindings within the device's limits (which also keeps every element index of the shaders
// below 2^32), texel views too when the kernel reads texels.
void checkDevice(const vk::Context& context, const std::string& op, const TensorView& x,
                 std::initializer_list<const TensorView*> texel_views, bool texels) {
  const vk::DeviceInfo& info = context.info();
  if (bindStorage(context, x).arg.bytes > info.max_storage_buffer_range)
    throw ShapeError(op + ": " + std::to_string(x.bytes()) +
                     " bytes exceed the device's maxStorageBufferRange (" +
                     std::to_string(info.max_storage_buffer_range) + ")");
  if (texels)
    for (const TensorView* t : texel_views)
      if (!fitsTexels(context, *t))
        throw ShapeError(op + ": the texel variants read f32 views of at most the device's " +
                         "maxTexelBufferElements (" +
                         std::to_string(info.max_texel_buffer_elements) + ")");
}

void checkArgs(const vk::Context& context, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, LayerNormVariant variant) {
  layerNormStatsShape(x.shape, gamma.shape, beta.shape, eps);
  const std::string op = "layerNorm: x " + x.shape.str();
  checkLikeX(op, "y", y, x.shape);
  checkStats(op, "mean", mean, x.shape);
  checkStats(op, "rstd", rstd, x.shape);
  checkFloat("layerNorm", "x", x);
  checkFloat("layerNorm", "gamma", gamma);
  checkFloat("layerNorm", "beta", beta);
  checkFloat("layerNorm", "y", y);
  checkFloat("layerNorm", "mean", mean);
  checkFloat("layerNorm", "rstd", rstd);
  if (y.dtype != x.dtype && overlaps(y, x))
    throw ShapeError(op + ": y in place of x needs x's dtype");
  checkDevice(context, op, x, {&x, &gamma, &beta}, usesTexels(variant));
}

// How forward.comp and backward.comp lay rows out: the constants they share, and the grid.
struct RowLayout {
  uint32_t group;  // workgroup size
  bool row_per_invocation;
  bool one_subgroup;
  bool texels;
  uint32_t groups;
  vk::SpecConstants spec() const {
    return {{"local_size_x", group},
            {"kRowPerInvocation", row_per_invocation},
            {"kOneSubgroup", one_subgroup},
            {"kTexelInput", texels}};
  }
};
RowLayout rowLayout(const vk::Context& context, LayerNormVariant variant, const Shape& x) {
  const bool texels = usesTexels(variant);
  const bool one_subgroup =
      variant == LayerNormVariant::SubgroupStorage || variant == LayerNormVariant::SubgroupTexel;
  const uint32_t rows = uint32_t(x.rows());
  const bool row_per_invocation = x.back() <= rowPerInvocationMaxN(context);
  const uint32_t group = row_per_invocation ? kRowPerInvocationGroup
                         : one_subgroup     ? std::max(1u, context.info().subgroup_size)
                                            : kWorkgroupPerRow;
  // The shaders grid-stride over rows, so the grid may be capped at the device limit.
  const uint32_t groups = std::min(row_per_invocation ? vk::divUp(rows, group) : rows,
                                   context.info().max_workgroup_count[0]);
  return {group, row_per_invocation, one_subgroup && !row_per_invocation, texels, groups};
}

}  // namespace

Shape layerNormStatsShape(const Shape& x, const Shape& gamma, const Shape& beta, float eps) {
  const std::string op = "layerNorm: x " + x.str();
  if (x.rank() < 1) throw ShapeError(op + " needs at least one dim");
  if (x.numel() == 0) throw ShapeError(op + " is empty");
  if (x.back() > UINT32_MAX || x.rows() > UINT32_MAX)
    throw ShapeError(op + ": rows and N must fit 32 bits");
  for (const auto& [name, t] : {std::pair{"gamma", &gamma}, std::pair{"beta", &beta}})
    if (!(*t == Shape{x.back()}))
      throw ShapeError(op + " needs " + name + " (" + std::to_string(x.back()) + "), got " +
                       t->str());
  if (!(eps >= 0.0f) || !std::isfinite(eps))
    throw ShapeError(op + ": eps must be finite and >= 0, got " + std::to_string(eps));
  return {x.rows()};
}

const char* layerNormVariantName(LayerNormVariant variant) {
  switch (variant) {
    case LayerNormVariant::Auto:
      return "auto";
    case LayerNormVariant::WorkgroupStorage:
      return "workgroup_storage";
    case LayerNormVariant::WorkgroupTexel:
      return "workgroup_texel";
    case LayerNormVariant::SubgroupStorage:
      return "subgroup_storage";
    case LayerNormVariant::SubgroupTexel:
      return "subgroup_texel";
  }
  return "?";
}

LayerNormVariant layerNormVariantFor(const vk::Context& context, const TensorView& x,
                                     const TensorView& gamma, const TensorView& beta) {
  // A CPU driver's subgroup is its SIMD width, fixed, so a workgroup of that size is one
  // subgroup, and texel fetches are its fast loads. On a GPU (an H100, BENCHMARKS.md, row
  // kernels on the GPU) storage loads are 7-10 % faster than texels, and a subgroup per row
  // wins for rows of up to 64 columns where the driver reports one fixed subgroup size.
  const vk::DeviceInfo& info = context.info();
  if (info.isCpu()) {
    const bool texels =
        fitsTexels(context, x) && fitsTexels(context, gamma) && fitsTexels(context, beta);
    return texels ? LayerNormVariant::SubgroupTexel : LayerNormVariant::SubgroupStorage;
  }
  if (info.fixedSubgroupSize() && x.shape.back() <= kSubgroupRowsMaxN)
    return LayerNormVariant::SubgroupStorage;
  return LayerNormVariant::WorkgroupStorage;
}

void layerNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps) {
  layerNorm(rec, x, gamma, beta, y, mean, rstd, eps, LayerNormVariant::Auto);
}

void layerNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, LayerNormVariant variant) {
  vk::Context& context = rec.context();
  checkArgs(context, x, gamma, beta, y, mean, rstd, eps, variant);
  if (variant == LayerNormVariant::Auto) variant = layerNormVariantFor(context, x, gamma, beta);
  const RowLayout layout = rowLayout(context, variant, x.shape);
  const bool texels = layout.texels;
  // x, gamma, beta, y, mean and rstd: on a device that binds fewer than 6 storage buffers the
  // ".sb4" build reads gamma and beta through texel views.
  const bool four = fewerStorageBuffers(context, 6);
  const bool s16 = x.dtype != DType::F32 || gamma.dtype != DType::F32 || beta.dtype != DType::F32 ||
                   y.dtype != DType::F32 || mean.dtype != DType::F32 || rstd.dtype != DType::F32;
  const Bound bx = bindStorage(context, x),
              bgamma = bindInput(context, gamma, four, s16, "layer_norm", "gamma"),
              bbeta = bindInput(context, beta, four, s16, "layer_norm", "beta"),
              by = bindStorage(context, y), bmean = bindStorage(context, mean),
              brstd = bindStorage(context, rstd);
  const LayerNormPush push{uint32_t(x.shape.rows()),
                           uint32_t(x.shape.back()),
                           eps,
                           bx.skip,
                           bgamma.skip,
                           bbeta.skip,
                           by.skip,
                           bmean.skip,
                           brstd.skip};
  // 4 columns per fetch where rows of a workgroup and the views allow RGBA32F texels, and y
  // stored 16 bytes at a time where its skip is a multiple of 4 as well.
  const bool row_per_invocation = layout.row_per_invocation;
  const bool vec4 = texels && !row_per_invocation && x.shape.back() % 4 == 0 &&
                    texelFits(context, x, kRgba32f) && texelFits(context, gamma, kRgba32f) &&
                    texelFits(context, beta, kRgba32f);
  const vk::TexelFormat format = vec4 ? kRgba32f : kR32f;
  vk::SpecConstants spec = layout.spec();
  spec.push_back({"kVec4", vec4});
  spec.push_back({"kStore4", vec4 && vec4Storable(context, y)});
  const vk::Kernel& kernel =
      floatKernel(context, four ? "layer_norm/forward.sb4" : "layer_norm/forward", spec,
                  {{"x_dtype", x.dtype},
                   {"gamma_dtype", gamma.dtype},
                   {"beta_dtype", beta.dtype},
                   {"y_dtype", y.dtype},
                   {"mean_out_dtype", mean.dtype},
                   {"rstd_out_dtype", rstd.dtype}});
  // Storage and texel bindings of a view start at the same aligned offset, so one skip
  // serves both.
  const vk::Arg args[] = {bx.arg,     texelArg(context, x, texels, format),
                          bgamma.arg, texelArg(context, gamma, texels, format),
                          bbeta.arg,  texelArg(context, beta, texels, format),
                          by.arg,     bmean.arg,
                          brstd.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), layout.groups);
}

const char* layerNormParamsVariantName(LayerNormParamsVariant variant) {
  switch (variant) {
    case LayerNormParamsVariant::Auto:
      return "auto";
    case LayerNormParamsVariant::Columns:
      return "columns";
    case LayerNormParamsVariant::Blocked:
      return "blocked";
    case LayerNormParamsVariant::WithDx:
      return "with_dx";
  }
  return "?";
}

int64_t layerNormBackwardScratch(int64_t rows, int64_t n) {
  return 2 * ((rows + kBlockRows - 1) / kBlockRows) * n;
}

void layerNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                       const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                       const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                       const TensorView& scratch, Write w) {
  layerNormBackward(rec, x, gamma, mean, rstd, dy, dx, dgamma, dbeta, scratch, w, w,
                    LayerNormVariant::Auto, LayerNormParamsVariant::Auto);
}

namespace {

// What the backward's kernels share: the inputs, their bindings and where dgamma and dbeta go.
struct BackwardJob {
  vk::Recorder& rec;
  const TensorView &x, &dy, &mean, &rstd;
  Bound bx, bdy, bmean, brstd;
  int64_t rows, n;
  bool want_gamma, want_beta;
  // An unwanted output is bound to the wanted one and never written.
  const TensorView &out_gamma, &out_beta;
  bool accumulate;      // dgamma, dbeta (params_write)
  uint32_t group;       // columnGroup
  TensorView partials;  // scratch as (layerNormBackwardScratch) f32, when params are wanted
  // The device binds fewer than the dx kernel's 8 storage buffers: both kernels take their
  // ".sb4" builds (gamma, mean and rstd read as texels; no WithDx).
  bool four;
};

// The views and shapes layerNormBackward takes; returns the message prefix "layerNormBackward:
// x (4,7)".
std::string checkBackwardShapes(const TensorView& x, const TensorView& gamma,
                                const TensorView& mean, const TensorView& rstd,
                                const TensorView& dy, const TensorView& dx,
                                const TensorView& dgamma, const TensorView& dbeta,
                                const TensorView& scratch) {
  const std::string op = checkX("layerNormBackward", x);
  const int64_t n = x.shape.back();
  checkVector(op, "gamma", gamma, n);
  checkStats(op, "mean", mean, x.shape);
  checkStats(op, "rstd", rstd, x.shape);
  checkLikeX(op, "dy", dy, x.shape);
  checkLikeX(op, "dx", dx, x.shape);
  if (dgamma.buffer) checkVector(op, "dgamma", dgamma, n);
  if (dbeta.buffer) checkVector(op, "dbeta", dbeta, n);
  const int64_t scratch_need = layerNormBackwardScratch(x.shape.rows(), n);
  if ((dgamma.buffer || dbeta.buffer) && scratch.shape.numel() < scratch_need)
    throw ShapeError(op + " needs scratch of " + std::to_string(scratch_need) +
                     " floats (layerNormBackwardScratch), got " + scratch.shape.str());
  return op;
}

// Formats and aliasing: float tensors in any format, scratch f32; no output overlaps an input
// or another output. op: checkBackwardShapes' prefix.
void checkBackwardOperands(const std::string& op, const TensorView& x, const TensorView& gamma,
                           const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                           const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                           const TensorView& scratch, const TensorView* dx_addend) {
  const char* name = "layerNormBackward";
  const std::pair<const char*, const TensorView*> inputs[] = {
      {"x", &x}, {"gamma", &gamma}, {"mean", &mean}, {"rstd", &rstd}, {"dy", &dy}};
  for (auto [in_name, in] : inputs) checkFloatOperand(name, in_name, *in);
  std::vector<std::pair<const char*, const TensorView*>> outputs = {{"dx", &dx}};
  if (dgamma.buffer) outputs.push_back({"dgamma", &dgamma});
  if (dbeta.buffer) outputs.push_back({"dbeta", &dbeta});
  if (dgamma.buffer || dbeta.buffer) outputs.push_back({"scratch", &scratch});
  if (dx_addend) {
    checkLikeX(op, "dx_addend", *dx_addend, x.shape);
    checkFloatOperand(name, "dx_addend", *dx_addend);
    for (size_t i = 0; i < outputs.size(); ++i)
      checkAlias(name, outputs[i].first, *outputs[i].second, "dx_addend", *dx_addend, false);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].second == &scratch)
      checkOperand(name, outputs[i].first, *outputs[i].second);  // f32 partial sums
    else
      checkFloatOperand(name, outputs[i].first, *outputs[i].second);
    for (auto [in_name, in] : inputs)
      checkAlias(name, outputs[i].first, *outputs[i].second, in_name, *in, false);
    for (size_t j = 0; j < i; ++j)
      checkAlias(name, outputs[i].first, *outputs[i].second, outputs[j].first, *outputs[j].second,
                 false);
  }
}

// Auto resolved (layerNormParamsVariant's comment), WithDx where it does not fit made Blocked,
// and the loop limits of CPU devices checked when dgamma or dbeta is wanted.
LayerNormParamsVariant pickParams(const vk::Context& context, const std::string& op,
                                  LayerNormParamsVariant params, bool with_dx_fits, int64_t rows,
                                  bool want_params) {
  const bool cpu = context.info().isCpu();
  if (params == LayerNormParamsVariant::Auto)
    params = cpu && with_dx_fits                   ? LayerNormParamsVariant::WithDx
             : cpu && rows <= kColumnsMaxRowsOnCpu ? LayerNormParamsVariant::Columns
                                                   : LayerNormParamsVariant::Blocked;
  if (params == LayerNormParamsVariant::WithDx && !with_dx_fits)
    params = LayerNormParamsVariant::Blocked;  // as documented: where the layout allows
  if (want_params && params == LayerNormParamsVariant::Columns && cpu &&
      rows > kColumnsMaxRowsOnCpu)
    throw ShapeError(op + ": the columns variant takes at most " +
                     std::to_string(kColumnsMaxRowsOnCpu) + " rows on CPU devices");
  // The sum over blocks loops over every block in one invocation (the loop limit again).
  if (want_params && cpu && rows > kColumnsMaxRowsOnCpu * kBlockRows)
    throw ShapeError(op + ": more than " + std::to_string(kColumnsMaxRowsOnCpu * kBlockRows) +
                     " rows for dgamma and dbeta on a CPU device");
  return params;
}

// The sum over blocks of partials (blocks, N) at gamma_first and beta_first of `partials`.
void reduceBlocks(const BackwardJob& job, const Bound& partials, uint32_t blocks,
                  uint32_t gamma_first, uint32_t beta_first) {
  vk::Context& context = job.rec.context();
  const Bound bdgamma = bindStorage(context, job.out_gamma),
              bdbeta = bindStorage(context, job.out_beta);
  const ReducePush reduce{uint32_t(job.n), blocks,       gamma_first,
                          beta_first,      bdgamma.skip, bdbeta.skip};
  const vk::Kernel& reducer =
      floatKernel(context, "layer_norm/backward_reduce",
                  {{"local_size_x", job.group},
                   {"kAccumulate", job.accumulate},
                   {"kGamma", job.want_gamma},
                   {"kBeta", job.want_beta}},
                  {{"dgamma_dtype", job.out_gamma.dtype}, {"dbeta_dtype", job.out_beta.dtype}});
  const vk::Arg reduce_args[] = {partials.arg, bdgamma.arg, bdbeta.arg};
  job.rec.dispatchGroups(reducer, reduce_args, &reduce, sizeof(reduce),
                         gridGroups(context, uint64_t(job.n), job.group));
}

// backward_params.comp over `blocks` blocks of rows: one block straight into dgamma and dbeta,
// several into the partials. Returns its push constants (where the partials went).
ParamsPush recordColumnSums(const BackwardJob& job, bool blocked) {
  vk::Context& context = job.rec.context();
  const uint32_t n = uint32_t(job.n);
  // x and dy as texels wherever they fit, whatever the dx layout; 4 columns per invocation
  // where the rows and views allow RGBA32F fetches.
  const bool texels = fitsTexels(context, job.x) && fitsTexels(context, job.dy);
  const bool vec4 = texels && n % 4 == 0 && texelFits(context, job.x, kRgba32f) &&
                    texelFits(context, job.dy, kRgba32f);
  const vk::TexelFormat format = vec4 ? kRgba32f : kR32f;
  const uint32_t blocks = blocked ? uint32_t((job.rows + kBlockRows - 1) / kBlockRows) : 1;
  const TensorView& gamma_out = blocked ? job.partials : job.out_gamma;
  const TensorView& beta_out = blocked ? job.partials : job.out_beta;
  const Bound bgamma_out = bindStorage(context, gamma_out),
              bbeta_out = bindStorage(context, beta_out);
  const uint32_t block_rows = uint32_t(blocked ? kBlockRows : job.rows);
  const uint32_t beta_first = bbeta_out.skip + (blocked ? blocks * n : 0);
  const ParamsPush push{uint32_t(job.rows), n,
                        block_rows,         blocks,
                        job.bx.skip,        job.bdy.skip,
                        job.bmean.skip,     job.brstd.skip,
                        bgamma_out.skip,    beta_first};
  const bool s16 = job.x.dtype != DType::F32 || job.dy.dtype != DType::F32 ||
                   job.mean.dtype != DType::F32 || job.rstd.dtype != DType::F32 ||
                   gamma_out.dtype != DType::F32 || beta_out.dtype != DType::F32;
  const char* op = "layerNormBackward";
  const Bound bmean = bindInput(context, job.mean, job.four, s16, op, "mean"),
              brstd = bindInput(context, job.rstd, job.four, s16, op, "rstd");
  const vk::Kernel& kernel = floatKernel(
      context, job.four ? "layer_norm/backward_params.sb4" : "layer_norm/backward_params",
      {{"local_size_x", job.group},
       {"kTexelInput", texels},
       {"kAccumulate", job.accumulate && !blocked},
       {"kGamma", job.want_gamma},
       {"kBeta", job.want_beta},
       {"kVec4", vec4}},
      {{"x_dtype", job.x.dtype},
       {"dy_dtype", job.dy.dtype},
       {"mean_dtype", job.mean.dtype},
       {"rstd_dtype", job.rstd.dtype},
       {"out_gamma_dtype", gamma_out.dtype},
       {"out_beta_dtype", beta_out.dtype}});
  const vk::Arg args[] = {job.bx.arg,     texelArg(context, job.x, texels, format),
                          job.bdy.arg,    texelArg(context, job.dy, texels, format),
                          bmean.arg,      brstd.arg,
                          bgamma_out.arg, bbeta_out.arg};
  const uint32_t max_y = context.info().max_workgroup_count[1];
  job.rec.dispatchGroups(kernel, args, &push, sizeof(push),
                         gridGroups(context, uint64_t(vec4 ? n / 4 : n), job.group),
                         std::min(blocks, max_y));
  return push;
}

// Columns: one invocation per column sums every row into dgamma and dbeta, one dispatch.
void paramsByColumns(const BackwardJob& job) {
  recordColumnSums(job, false);
}

// Blocked: partial sums per block of rows into scratch, then the sum over blocks.
void paramsByBlocks(const BackwardJob& job) {
  const ParamsPush push = recordColumnSums(job, true);
  reduceBlocks(job, bindStorage(job.rec.context(), job.partials), push.blocks, push.gamma_skip,
               push.beta_skip);
}

// The dx kernel (backward.comp) and what it needs besides the job.
struct DxArgs {
  const TensorView& gamma;
  const TensorView& dx;
  const TensorView* addend;  // or null
  const RowLayout& layout;
  bool vec4;        // RGBA32F texels
  bool accumulate;  // dx_write
  uint32_t lane_vec4s;
};

// dx; with `partials` (WithDx) the kernel also writes each block's parameter sums there.
// Returns its push constants (where the partials went).
BackwardPush recordDx(const BackwardJob& job, const DxArgs& a, const Bound* partials) {
  vk::Context& context = job.rec.context();
  const vk::TexelFormat format = a.vec4 ? kRgba32f : kR32f;
  const Bound bgamma = bindStorage(context, a.gamma), bdx = bindStorage(context, a.dx);
  // Without an addend its binding is a stand-in, dy's, never read; without WithDx the
  // partials' binding is dx's, never written.
  const Bound baddend = a.addend ? bindStorage(context, *a.addend) : job.bdy;
  const TensorView& addend = a.addend ? *a.addend : job.dy;
  const uint32_t blocks = uint32_t((job.rows + kBlockRows - 1) / kBlockRows);
  const Bound bpartials = partials ? *partials : bdx;
  BackwardPush push{uint32_t(job.rows), uint32_t(job.n), job.bx.skip, job.bdy.skip, bgamma.skip,
                    job.bmean.skip,     job.brstd.skip,  bdx.skip,    baddend.skip};
  if (partials) {
    push.block_rows = uint32_t(kBlockRows), push.blocks = blocks;
    push.gamma_first = bpartials.skip, push.beta_first = bpartials.skip + blocks * uint32_t(job.n);
  }
  vk::SpecConstants spec = a.layout.spec();
  spec.push_back({"kAccumulate", a.accumulate});
  spec.push_back({"kVec4", a.vec4});
  spec.push_back({"kAddend", a.addend != nullptr});
  spec.push_back({"kWithParams", partials != nullptr});
  spec.push_back({"kLaneVec4s", partials ? a.lane_vec4s : 1u});
  const bool s16 = job.x.dtype != DType::F32 || job.dy.dtype != DType::F32 ||
                   a.gamma.dtype != DType::F32 || job.mean.dtype != DType::F32 ||
                   job.rstd.dtype != DType::F32 || a.dx.dtype != DType::F32 ||
                   addend.dtype != DType::F32;
  const char* op = "layerNormBackward";
  const Bound bgamma_in = bindInput(context, a.gamma, job.four, s16, op, "gamma"),
              bmean = bindInput(context, job.mean, job.four, s16, op, "mean"),
              brstd = bindInput(context, job.rstd, job.four, s16, op, "rstd");
  const vk::Kernel& kernel =
      floatKernel(context, job.four ? "layer_norm/backward.sb4" : "layer_norm/backward", spec,
                  {{"x_dtype", job.x.dtype},
                   {"dy_dtype", job.dy.dtype},
                   {"gamma_dtype", a.gamma.dtype},
                   {"mean_dtype", job.mean.dtype},
                   {"rstd_dtype", job.rstd.dtype},
                   {"dx_dtype", a.dx.dtype},
                   {"addend_dtype", addend.dtype}});
  const bool texels = a.layout.texels;
  const vk::Arg args[] = {job.bx.arg,    texelArg(context, job.x, texels, format),
                          job.bdy.arg,   texelArg(context, job.dy, texels, format),
                          bgamma_in.arg, texelArg(context, a.gamma, texels, format),
                          bmean.arg,     brstd.arg,
                          bdx.arg,       baddend.arg,
                          bpartials.arg};
  // The .sb4 build has no partials binding (and never runs WithDx).
  const std::span<const vk::Arg> bound(args, job.four ? 10 : 11);
  const uint32_t groups =
      partials ? std::min(blocks, context.info().max_workgroup_count[0]) : a.layout.groups;
  job.rec.dispatchGroups(kernel, bound, &push, sizeof(push), groups);
  return push;
}

// WithDx: the dx kernel sums each block's parameter gradients as it goes (x and dy read once),
// then the sum over blocks.
void paramsWithDx(const BackwardJob& job, const DxArgs& a) {
  const Bound partials = bindStorage(job.rec.context(), job.partials);
  const BackwardPush push = recordDx(job, a, &partials);
  reduceBlocks(job, partials, push.blocks, push.gamma_first, push.beta_first);
}

}  // namespace

// lavapipe (2 cores shared with other jobs, so medians of 15 runs, 4 sets), x (4096, 768),
// whole backward in ms by timestamps:
//   dx only (subgroup per row, vec4 texels)              12.6-13.1
//   dx + dgamma/dbeta by Columns (one dispatch)          21.8-22.5   params ~9.2
//   dx + dgamma/dbeta by Blocked (64-row blocks, 2 disp) 23.2-24.6   params ~10.8
// So Columns is ~15% faster for the parameter sums on a CPU device, where 192 vec4 columns
// already give both threads work; it also needs no scratch traffic. Both read x and dy once
// (25 MB, ~2.7 GB/s). RGBA32F fetches of 4 columns made each kernel ~2-3x faster than
// R32F (dx only was 24-29 ms, the parameter sums ~17+ ms). On GPUs, N columns alone cannot
// fill the device, hence Blocked (rows / 64 times more invocations).
// At the GPT's (768, 128) the parameter sums by Columns took as long as dx (~0.75 ms each:
// 4 workgroups, each a 768-row chain), so WithDx sums each 64-row block in the dx kernel
// itself, x and dy read once, then the sum over blocks: the whole backward median 2.2-3.2 ->
// 1.1-2.2 ms (min 1.5 -> 1.0), 5 alternating rounds (BENCHMARKS.md).
void layerNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                       const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                       const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                       const TensorView& scratch, Write dx_write, Write params_write,
                       LayerNormVariant variant, LayerNormParamsVariant params,
                       const TensorView* dx_addend) {
  vk::Context& context = rec.context();
  const std::string op = checkBackwardShapes(x, gamma, mean, rstd, dy, dx, dgamma, dbeta, scratch);
  checkBackwardOperands(op, x, gamma, mean, rstd, dy, dx, dgamma, dbeta, scratch, dx_addend);
  checkDevice(context, op, x, {&x, &gamma, &dy}, usesTexels(variant));
  const int64_t n = x.shape.back(), rows = x.shape.rows();
  if (variant == LayerNormVariant::Auto) variant = layerNormVariantFor(context, x, gamma, dy);
  const RowLayout layout = rowLayout(context, variant, x.shape);
  // 4 columns per fetch where rows of a workgroup and the views allow RGBA32F texels.
  const bool dx_vec4 = layout.texels && !layout.row_per_invocation && n % 4 == 0 &&
                       texelFits(context, x, kRgba32f) && texelFits(context, dy, kRgba32f) &&
                       texelFits(context, gamma, kRgba32f);
  // WithDx: the dx kernel's RGBA32F layout, one subgroup per row, each lane's vec4 columns
  // held in registers.
  const uint32_t sg = std::max(1u, context.info().subgroup_size);
  const uint32_t lane_vec4s = uint32_t((n / 4 + sg - 1) / sg);
  const bool four = fewerStorageBuffers(context, 8);
  const bool with_dx_fits =
      !four && dx_vec4 && layout.one_subgroup && lane_vec4s <= kWithDxMaxLaneVec4s;
  const bool want_gamma = dgamma.buffer != nullptr, want_beta = dbeta.buffer != nullptr;
  const bool want_params = want_gamma || want_beta;
  params = pickParams(context, op, params, with_dx_fits, rows, want_params);
  const BackwardJob job{
      rec,
      x,
      dy,
      mean,
      rstd,
      bindStorage(context, x),
      bindStorage(context, dy),
      bindStorage(context, mean),
      bindStorage(context, rstd),
      rows,
      n,
      want_gamma,
      want_beta,
      want_gamma ? dgamma : dbeta,
      want_beta ? dbeta : dgamma,
      params_write == Write::Accumulate,
      columnGroup(context),
      want_params ? view(*scratch.buffer, {layerNormBackwardScratch(rows, n)}, scratch.offset)
                  : TensorView{},
      four};
  const DxArgs dx_args{gamma,     dx, dx_addend, layout, dx_vec4, dx_write == Write::Accumulate,
                       lane_vec4s};
  // Columns and Blocked first: they only read, so nothing orders them after dx.
  if (!want_params) {
    recordDx(job, dx_args, nullptr);
  } else if (params == LayerNormParamsVariant::WithDx) {
    paramsWithDx(job, dx_args);
  } else {
    if (params == LayerNormParamsVariant::Columns)
      paramsByColumns(job);
    else
      paramsByBlocks(job);
    recordDx(job, dx_args, nullptr);
  }
}

}  // namespace vkgrad::ops
