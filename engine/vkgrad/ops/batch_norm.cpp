#include "vkgrad/ops/batch_norm.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// batch_norm/forward.comp's push constants.
struct ForwardPush {
  uint32_t n, c, s;  // x as (N,C,S)
  float eps, momentum;
  uint32_t x_skip, gamma_skip, beta_skip, y_skip, stat0_skip, stat1_skip, rmean_skip, rvar_skip;
};
static_assert(sizeof(ForwardPush) == 52);

// batch_norm/backward.comp's push constants.
struct BackwardPush {
  uint32_t n, c, s;
  float eps;
  uint32_t x_skip, gamma_skip, stat0_skip, stat1_skip, dy_skip, dx_skip, dgamma_skip, dbeta_skip;
};
static_assert(sizeof(BackwardPush) == 48);

// batch_norm/running.comp's push constants (the ".sb4" forward's running update).
struct RunningPush {
  uint32_t c, m;  // channels, values per channel
  float eps, momentum;
  uint32_t mean_skip, stat1_skip, rmean_skip, rvar_skip;
};
static_assert(sizeof(RunningPush) == 32);

// CPU devices end an invocation after 65535 loop iterations, counted over all its loops
// (LP_MAX_TGSI_LOOP_ITERATIONS), and keep what they have. Each invocation makes up to three
// passes of M / workgroup over its channel (the training forward: sum, squares, output; the
// backward two), plus its channel loop: M = 200,001 on a subgroup of 8 once looped 75,000
// times and left the last third of the output as it was.
constexpr int64_t kCpuLoopLimit = 65535;
int64_t laneSteps(int64_t per_channel, uint32_t group) {
  return 3 * ((per_channel + group - 1) / group) + 1;
}

// x as (N,C,S): S is the product of the axes after C.
struct Dims {
  uint32_t n, c, s;
  int64_t perChannel() const { return int64_t(n) * s; }
};
Dims dims(const Shape& x) {
  return {uint32_t(x[0]), uint32_t(x[1]), uint32_t(x.numel() / std::max<int64_t>(1, x[0] * x[1]))};
}

// How a workgroup covers its channel.
struct ChannelLayout {
  uint32_t group;     // invocations
  bool one_subgroup;  // the workgroup is one subgroup: reductions without barriers
};

// CPU devices run a workgroup of subgroupSize invocations as one subgroup, and a shader with
// barriers as coroutines: there one subgroup per channel, no barriers, where the loop limit
// allows (lavapipe, (32,64,28,28): forward 44-46 ms and backward 44-47 ms against 88-100 and
// 102-110 ms with 256 invocations, 3 alternating rounds; BENCHMARKS.md). Elsewhere the
// channel's element count rounded up to a power of two between 32 and 256 (an MLP's batch
// of 16 need not wake 256 invocations), within the device.
ChannelLayout channelLayout(const vk::Context& context, int64_t per_channel,
                            BatchNormVariant variant) {
  const vk::DeviceInfo& info = context.info();
  const uint32_t sg = std::max(1u, info.subgroup_size);
  if (variant == BatchNormVariant::Auto)
    variant = info.isCpu() && laneSteps(per_channel, sg) <= kCpuLoopLimit
                  ? BatchNormVariant::Subgroup
                  : BatchNormVariant::Workgroup;
  if (variant == BatchNormVariant::Subgroup) return {sg, true};
  uint64_t want = std::bit_ceil(uint64_t(std::clamp<int64_t>(per_channel, 32, 256)));
  // On a CPU device as many invocations as the loop limit needs (checkDevice refuses beyond).
  if (info.isCpu())
    want = std::max(want, std::bit_ceil(uint64_t(3 * per_channel / (kCpuLoopLimit - 1) + 1)));
  return {workgroupSize(context, uint32_t(std::min<uint64_t>(want, 1024))), false};
}

void checkDevice(const vk::Context& context, const std::string& op, int64_t per_channel,
                 uint32_t group) {
  if (context.info().isCpu() && laneSteps(per_channel, group) > kCpuLoopLimit)
    throw ShapeError(op + ": " + std::to_string(per_channel) +
                     " values per channel exceed what a CPU device's loop limit allows (" +
                     std::to_string((kCpuLoopLimit - 1) / 3 * group) + ")");
}

void checkStat(const std::string& op, const char* fn, const char* name, const TensorView& t,
               int64_t c) {
  if (!(t.shape == Shape{c}))
    throw ShapeError(op + " needs " + name + " (" + std::to_string(c) + "), got " + t.shape.str());
  checkOperand(fn, name, t);  // f32
}

// The shapes and operands every forward shares; returns the message prefix.
std::string checkForward(const char* fn, const TensorView& x, const TensorView& gamma,
                         const TensorView& beta, const TensorView& y, float eps, bool training) {
  batchNormStatsShape(x.shape, gamma.shape, beta.shape, eps, training);
  const std::string op = std::string(fn) + ": x " + x.shape.str();
  if (!(y.shape == x.shape)) throw ShapeError(op + " needs y shaped like x, got " + y.shape.str());
  checkFloatOperand(fn, "x", x);
  checkFloatOperand(fn, "gamma", gamma);
  checkFloatOperand(fn, "beta", beta);
  checkFloatOperand(fn, "y", y);
  checkAlias(fn, "y", y, "x", x, false);
  checkAlias(fn, "y", y, "gamma", gamma, false);
  checkAlias(fn, "y", y, "beta", beta, false);
  return op;
}

// batch_norm/running.comp after the ".sb4" forward: the running update from the mean and
// variance it saved (in mean and rstd), then rstd in place of the variance.
void recordRunning(vk::Recorder& rec, const Dims& d, float eps, float momentum, const Bound& mean,
                   const Bound& stat1, const Bound& running_mean, const Bound& running_var) {
  const RunningPush push{d.c,
                         uint32_t(d.perChannel()),
                         eps,
                         momentum,
                         mean.skip,
                         stat1.skip,
                         running_mean.skip,
                         running_var.skip};
  vk::Context& context = rec.context();
  const uint32_t group = workgroupSize(context, 64);
  const vk::Arg args[] = {mean.arg, stat1.arg, running_mean.arg, running_var.arg};
  rec.dispatchGroups(context.kernels().get("batch_norm/running", {{"local_size_x", group}}), args,
                     &push, sizeof(push),
                     std::min(vk::divUp(d.c, group), context.info().max_workgroup_count[0]));
}

struct ForwardArgs {
  const TensorView &x, &gamma, &beta, &y, &stat0, &stat1;
  const TensorView* running_mean;  // null: not updated
  const TensorView* running_var;
  float eps, momentum;
  bool training;
  BatchNormVariant variant;
};

void recordForward(vk::Recorder& rec, const std::string& op, const ForwardArgs& a) {
  vk::Context& context = rec.context();
  const Dims d = dims(a.x.shape);
  const ChannelLayout layout = channelLayout(context, d.perChannel(), a.variant);
  checkDevice(context, op, d.perChannel(), layout.group);
  // Within 4 storage buffers the ".sb4" build reads gamma and beta through texel views and
  // leaves the running statistics to batch_norm/running.comp (recordRunning).
  const bool four = fewerStorageBuffers(context, 8);
  const bool s16 = a.x.dtype != DType::F32 || a.gamma.dtype != DType::F32 ||
                   a.beta.dtype != DType::F32 || a.y.dtype != DType::F32;
  const Bound bx = bindStorage(context, a.x),
              bgamma = bindInput(context, a.gamma, four, s16, op.c_str(), "gamma"),
              bbeta = bindInput(context, a.beta, four, s16, op.c_str(), "beta"),
              by = bindStorage(context, a.y), b0 = bindStorage(context, a.stat0),
              b1 = bindStorage(context, a.stat1);
  const bool update = a.running_mean != nullptr;
  // Without an update the running bindings are stand-ins (the statistics'), never touched.
  const Bound brm = update ? bindStorage(context, *a.running_mean) : b0;
  const Bound brv = update ? bindStorage(context, *a.running_var) : b1;
  const ForwardPush push{d.n,        d.c,     d.s,     a.eps,   a.momentum, bx.skip, bgamma.skip,
                         bbeta.skip, by.skip, b0.skip, b1.skip, brm.skip,   brv.skip};
  const vk::Kernel& kernel =
      floatKernel(context, four ? "batch_norm/forward.sb4" : "batch_norm/forward",
                  {{"local_size_x", layout.group},
                   {"kTraining", a.training},
                   {"kUpdateRunning", update},
                   {"kOneSubgroup", layout.one_subgroup}},
                  {{"x_dtype", a.x.dtype},
                   {"gamma_dtype", a.gamma.dtype},
                   {"beta_dtype", a.beta.dtype},
                   {"y_dtype", a.y.dtype}});
  const vk::Arg args[] = {bx.arg, bgamma.arg, bbeta.arg, by.arg, b0.arg, b1.arg, brm.arg, brv.arg};
  const uint32_t groups = std::min(d.c, context.info().max_workgroup_count[0]);
  if (!four) {
    rec.dispatchGroups(kernel, args, &push, sizeof(push), groups);
    return;
  }
  rec.dispatchGroups(kernel, std::span(args, 6), &push, sizeof(push), groups);
  if (update) recordRunning(rec, d, a.eps, a.momentum, b0, b1, brm, brv);
}

// What every dispatch of one backward shares.
struct BackwardJob {
  const TensorView &x, &gamma, &stat0, &stat1, &dy;
  Dims d;
  ChannelLayout layout;
  bool training;
  float eps;
};

// The outputs one dispatch binds (5, 6 and, in the usual build, 7: dx, dgamma and dbeta; the
// ".sb4" build has no 7 and reads dbeta at 5) and which it writes.
struct BackwardOutputs {
  const TensorView &at5, &at6;
  const TensorView* at7;  // null: the ".sb4" build
  // The ".sb4" dx dispatch's kSavedSums: the sums an earlier dispatch stored (f32), or null.
  const TensorView* saved_dgamma = nullptr;
  const TensorView* saved_dbeta = nullptr;
};
struct BackwardWrites {
  bool dx, gamma, beta;
};

void recordBackward(vk::Recorder& rec, const std::string& op, const BackwardJob& job,
                    const BackwardOutputs& out, BackwardWrites writes,
                    const BatchNormGrads& grads) {
  vk::Context& context = rec.context();
  const bool four = out.at7 == nullptr;
  const bool s16 = job.x.dtype != DType::F32 || job.gamma.dtype != DType::F32 ||
                   job.dy.dtype != DType::F32 || out.at5.dtype != DType::F32 ||
                   out.at6.dtype != DType::F32 || (!four && out.at7->dtype != DType::F32);
  const Bound bx = bindStorage(context, job.x),
              bgamma = bindInput(context, job.gamma, four, s16, op.c_str(), "gamma"),
              b0 = bindInput(context, job.stat0, four, s16, op.c_str(),
                             job.training ? "mean" : "running_mean"),
              b1 = bindInput(context, job.stat1, four, s16, op.c_str(),
                             job.training ? "rstd" : "running_var"),
              bdy = bindStorage(context, job.dy), b5 = bindStorage(context, out.at5),
              b6 = bindStorage(context, out.at6), b7 = four ? b5 : bindStorage(context, *out.at7);
  // The .sb4 build reads dbeta at binding 5, with dbeta_skip.
  const BackwardPush push{job.d.n, job.d.c, job.d.s,  job.eps, bx.skip, bgamma.skip,
                          b0.skip, b1.skip, bdy.skip, b5.skip, b6.skip, b7.skip};
  const vk::SpecConstants spec{{"local_size_x", job.layout.group},
                               {"kOneSubgroup", job.layout.one_subgroup},
                               {"kTraining", job.training},
                               {"kDx", writes.dx},
                               {"kGamma", writes.gamma},
                               {"kBeta", writes.beta},
                               {"kAccDx", grads.dx_write == Write::Accumulate},
                               {"kAccGamma", grads.dgamma_write == Write::Accumulate},
                               {"kAccBeta", grads.dbeta_write == Write::Accumulate}};
  const uint32_t groups = std::min(job.d.c, context.info().max_workgroup_count[0]);
  if (four) {
    // Without saved sums their texel bindings are stand-ins (mean's view), never read; with
    // them, the dispatch writes neither dgamma nor dbeta, so their skips carry the sums'.
    const bool saved = out.saved_dgamma != nullptr;
    const Bound bsg = saved ? bindInput(context, *out.saved_dgamma, true, s16, op.c_str(), "dgamma")
                            : b0,
                bsb = saved ? bindInput(context, *out.saved_dbeta, true, s16, op.c_str(), "dbeta")
                            : b0;
    BackwardPush sb4_push = push;
    if (saved) sb4_push.dgamma_skip = bsg.skip, sb4_push.dbeta_skip = bsb.skip;
    vk::SpecConstants sb4_spec = spec;
    sb4_spec.push_back({"kSavedSums", saved});
    const vk::Arg args[] = {bx.arg, bgamma.arg, b0.arg,  b1.arg, bdy.arg,
                            b5.arg, b6.arg,     bsg.arg, bsb.arg};
    rec.dispatchGroups(floatKernel(context, "batch_norm/backward.sb4", sb4_spec,
                                   {{"x_dtype", job.x.dtype},
                                    {"gamma_dtype", job.gamma.dtype},
                                    {"stat0_dtype", DType::F32},
                                    {"stat1_dtype", DType::F32},
                                    {"dy_dtype", job.dy.dtype},
                                    {"dx_dtype", out.at5.dtype},
                                    {"dgamma_dtype", out.at6.dtype},
                                    {"saved_dgamma_dtype", DType::F32},
                                    {"saved_dbeta_dtype", DType::F32}}),
                       args, &sb4_push, sizeof(sb4_push), groups);
    return;
  }
  const vk::Arg args[] = {bx.arg, bgamma.arg, b0.arg, b1.arg, bdy.arg, b5.arg, b6.arg, b7.arg};
  rec.dispatchGroups(floatKernel(context, "batch_norm/backward", spec,
                                 {{"x_dtype", job.x.dtype},
                                  {"gamma_dtype", job.gamma.dtype},
                                  {"dy_dtype", job.dy.dtype},
                                  {"dx_dtype", out.at5.dtype},
                                  {"dgamma_dtype", out.at6.dtype},
                                  {"dbeta_dtype", out.at7->dtype}}),
                     args, &push, sizeof(push), groups);
}

}  // namespace

Shape batchNormStatsShape(const Shape& x, const Shape& gamma, const Shape& beta, float eps,
                          bool training) {
  const std::string op = "batchNorm: x " + x.str();
  if (x.rank() < 2) throw ShapeError(op + " needs at least (N,C)");
  if (x.numel() == 0) throw ShapeError(op + " is empty");
  if (x.numel() > (int64_t(1) << 31)) throw ShapeError(op + " has more than 2^31 elements");
  const int64_t c = x[1];
  if (!(gamma == Shape{c}))
    throw ShapeError(op + " needs gamma (" + std::to_string(c) + "), got " + gamma.str());
  if (!(beta == Shape{c}))
    throw ShapeError(op + " needs beta (" + std::to_string(c) + "), got " + beta.str());
  if (!std::isfinite(eps) || eps < 0.0f)
    throw ShapeError(op + ": eps must be finite and >= 0, got " + std::to_string(eps));
  if (training && x.numel() / c < 2)
    throw ShapeError(op + ": training needs more than one value per channel");
  return {c};
}

void batchNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, const BatchNormRunning* running,
               BatchNormVariant variant) {
  const char* fn = "batchNorm";
  const std::string op = checkForward(fn, x, gamma, beta, y, eps, true);
  const int64_t c = x.shape[1];
  checkStat(op, fn, "mean", mean, c);
  checkStat(op, fn, "rstd", rstd, c);
  std::vector<std::pair<const char*, const TensorView*>> written = {
      {"y", &y}, {"mean", &mean}, {"rstd", &rstd}};
  if (running) {
    checkStat(op, fn, "running_mean", running->mean, c);
    checkStat(op, fn, "running_var", running->var, c);
    if (!(running->momentum >= 0.0f && running->momentum <= 1.0f))
      throw ShapeError(op + ": momentum must be in [0, 1], got " +
                       std::to_string(running->momentum));
    written.push_back({"running_mean", &running->mean});
    written.push_back({"running_var", &running->var});
  }
  for (size_t i = 0; i < written.size(); ++i) {
    for (auto [name, in] :
         {std::pair{"x", &x}, std::pair{"gamma", &gamma}, std::pair{"beta", &beta}})
      checkAlias(fn, written[i].first, *written[i].second, name, *in, false);
    for (size_t j = 0; j < i; ++j)
      checkAlias(fn, written[i].first, *written[i].second, written[j].first, *written[j].second,
                 false);
  }
  recordForward(
      rec, op,
      {x, gamma, beta, y, mean, rstd, running ? &running->mean : nullptr,
       running ? &running->var : nullptr, eps, running ? running->momentum : 0.0f, true, variant});
}

void batchNormInference(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                        const TensorView& beta, const TensorView& running_mean,
                        const TensorView& running_var, const TensorView& y, float eps,
                        BatchNormVariant variant) {
  const char* fn = "batchNormInference";
  const std::string op = checkForward(fn, x, gamma, beta, y, eps, false);
  checkStat(op, fn, "running_mean", running_mean, x.shape[1]);
  checkStat(op, fn, "running_var", running_var, x.shape[1]);
  checkAlias(fn, "y", y, "running_mean", running_mean, false);
  checkAlias(fn, "y", y, "running_var", running_var, false);
  recordForward(
      rec, op,
      {x, gamma, beta, y, running_mean, running_var, nullptr, nullptr, eps, 0.0f, false, variant});
}

void batchNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                       const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                       const BatchNormGrads& grads, bool training, float eps,
                       BatchNormVariant variant) {
  const char* fn = "batchNormBackward";
  batchNormStatsShape(x.shape, gamma.shape, gamma.shape, eps, training);
  const std::string op = std::string(fn) + ": x " + x.shape.str();
  const int64_t c = x.shape[1];
  checkStat(op, fn, training ? "mean" : "running_mean", mean, c);
  checkStat(op, fn, training ? "rstd" : "running_var", rstd, c);
  if (!(dy.shape == x.shape))
    throw ShapeError(op + " needs dy shaped like x, got " + dy.shape.str());
  checkFloatOperand(fn, "x", x);
  checkFloatOperand(fn, "gamma", gamma);
  checkFloatOperand(fn, "dy", dy);
  const bool want_dx = grads.dx.buffer, want_gamma = grads.dgamma.buffer,
             want_beta = grads.dbeta.buffer;
  if (!want_dx && !want_gamma && !want_beta) throw ShapeError(op + ": no gradient asked for");
  if (want_dx && !(grads.dx.shape == x.shape))
    throw ShapeError(op + " needs dx shaped like x, got " + grads.dx.shape.str());
  for (auto [name, t] : {std::pair{"dgamma", &grads.dgamma}, std::pair{"dbeta", &grads.dbeta}})
    if (t->buffer && !(t->shape == Shape{c}))
      throw ShapeError(op + " needs " + name + " (" + std::to_string(c) + "), got " +
                       t->shape.str());
  const std::pair<const char*, const TensorView*> inputs[] = {
      {"x", &x}, {"gamma", &gamma}, {"mean", &mean}, {"rstd", &rstd}, {"dy", &dy}};
  std::vector<std::pair<const char*, const TensorView*>> outputs;
  if (want_dx) outputs.push_back({"dx", &grads.dx});
  if (want_gamma) outputs.push_back({"dgamma", &grads.dgamma});
  if (want_beta) outputs.push_back({"dbeta", &grads.dbeta});
  for (size_t i = 0; i < outputs.size(); ++i) {
    checkFloatOperand(fn, outputs[i].first, *outputs[i].second);
    for (auto [name, in] : inputs)
      checkAlias(fn, outputs[i].first, *outputs[i].second, name, *in, false);
    for (size_t j = 0; j < i; ++j)
      checkAlias(fn, outputs[i].first, *outputs[i].second, outputs[j].first, *outputs[j].second,
                 false);
  }

  vk::Context& context = rec.context();
  const Dims d = dims(x.shape);
  const ChannelLayout layout = channelLayout(context, d.perChannel(), variant);
  checkDevice(context, op, d.perChannel(), layout.group);
  const BackwardJob job{x, gamma, mean, rstd, dy, d, layout, training, eps};
  // An output not wanted is bound to the first one that is: a stand-in, never touched.
  const TensorView& first = *outputs[0].second;
  const TensorView& dx = want_dx ? grads.dx : first;
  const TensorView& dgamma = want_gamma ? grads.dgamma : first;
  const TensorView& dbeta = want_beta ? grads.dbeta : first;
  if (!fewerStorageBuffers(context, 8)) {
    recordBackward(rec, op, job, {dx, dgamma, &dbeta}, {want_dx, want_gamma, want_beta}, grads);
    return;
  }
  // Within 4 storage buffers the ".sb4" build binds two outputs: dgamma and dbeta (at dx's
  // binding) in one dispatch, dx in another. Where the first stores both channel sums exactly
  // (training, f32, overwritten) the dx dispatch reads them back; otherwise it sums again.
  if (want_gamma || want_beta)
    recordBackward(rec, op, job, {want_beta ? dbeta : dgamma, dgamma, nullptr},
                   {false, want_gamma, want_beta}, grads);
  const bool saved = training && want_gamma && want_beta && dgamma.dtype == DType::F32 &&
                     dbeta.dtype == DType::F32 && grads.dgamma_write == Write::Overwrite &&
                     grads.dbeta_write == Write::Overwrite;
  if (want_dx)
    recordBackward(rec, op, job,
                   {dx, dx, nullptr, saved ? &dgamma : nullptr, saved ? &dbeta : nullptr},
                   {true, false, false}, grads);
}

}  // namespace vkgrad::ops
