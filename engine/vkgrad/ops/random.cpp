#include "vkgrad/ops/random.h"

#include <algorithm>
#include <cmath>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct StreamPush {
  uint32_t n, stream;
};
static_assert(sizeof(StreamPush) == 8);

struct UniformPush {
  uint32_t n, stream;
  float lo, hi;  // or mean, stddev for normal
};
static_assert(sizeof(UniformPush) == 16);

struct DropoutPush {
  uint32_t n, stream;
  uint32_t threshold;       // keep iff stream word >= threshold
  float scale;              // 1 / (1 - p)
  uint32_t x_skip, y_skip;  // first elements inside the bindings
};
static_assert(sizeof(DropoutPush) == 24);

struct ReparameterizePush {
  uint32_t n, stream;
  uint32_t skip[3];  // first elements of the three float views inside their bindings
};
static_assert(sizeof(ReparameterizePush) == 20);

struct CategoricalPush {
  uint32_t rows, cols, stream;
};
static_assert(sizeof(CategoricalPush) == 12);

struct AdvancePush {
  uint32_t steps;
};
static_assert(sizeof(AdvancePush) == 4);

// Elements of a stream-indexed tensor; the kernels index with 32 bits and round up to 4.
uint32_t streamElements(const char* op, const char* name, const TensorView& t) {
  const int64_t n = t.shape.numel();
  if (n == 0) throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " is empty");
  if (n > int64_t(UINT32_MAX) - 3)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() +
                     " has more than 2^32 - 4 elements");
  return uint32_t(n);
}

vk::Arg arg(const TensorView& t) {
  return {*t.buffer, t.offset, t.bytes()};
}
vk::Arg rngArg(const TensorView& rng) {
  return {*rng.buffer, rng.offset, 16};
}

void checkP(const char* op, float p) {
  if (!(p >= 0.0f && p < 1.0f))
    throw ShapeError(std::string(op) + ": drop probability " + std::to_string(p) +
                     " is outside [0, 1)");
}

void recordDropout(vk::Recorder& rec, const TensorView& in, const TensorView& out, float p,
                   const TensorView& rng, uint32_t stream, Write write) {
  vk::Context& ctx = rec.context();
  const vk::Kernel& kernel = floatKernel(
      ctx, "random/dropout",
      {{"local_size_x", workgroupSize(ctx)}, {"kAccumulate", write == Write::Accumulate}},
      {{"x_dtype", in.dtype}, {"y_dtype", out.dtype}});
  const Bound bi = bindStorage(ctx, in), bo = bindStorage(ctx, out);
  const DropoutPush push{uint32_t(in.shape.numel()),     stream,  dropoutThreshold(p),
                         float(1.0 / (1.0 - double(p))), bi.skip, bo.skip};
  const vk::Arg args[] = {bi.arg, bo.arg, rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     strideGroups(rec.context(), vk::divUp(push.n, 4)));
}

void checkSameShape(const char* op, const char* a_name, const TensorView& a, const char* b_name,
                    const TensorView& b) {
  if (!(a.shape == b.shape))
    throw ShapeError(std::string(op) + ": " + a_name + " " + a.shape.str() + " and " + b_name +
                     " " + b.shape.str() + " must have the same shape");
}

}  // namespace

void checkRngState(const char* op, const TensorView& rng) {
  if (rng.shape.numel() < 4)
    throw ShapeError(std::string(op) + ": rng state " + rng.shape.str() +
                     " must hold 4 u32 words {seed_lo, seed_hi, offset_lo, offset_hi}");
  checkFits(op, "rng", rng, DType::U32);
}

uint32_t dropoutThreshold(float p) {
  const double t = std::nearbyint(double(p) * 4294967296.0);
  return t >= 4294967295.0 ? UINT32_MAX : t <= 0.0 ? 0u : uint32_t(t);
}

void randomBits(vk::Recorder& rec, const TensorView& out, const TensorView& rng, uint32_t stream) {
  const uint32_t n = streamElements("randomBits", "out", out);
  checkFits("randomBits", "out", out, DType::U32);
  checkRngState("randomBits", rng);
  const vk::Kernel& kernel =
      rec.context().kernels().get("random/bits", {{"local_size_x", workgroupSize(rec.context())}});
  const StreamPush push{n, stream};
  const vk::Arg args[] = {arg(out), rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     strideGroups(rec.context(), vk::divUp(n, 4)));
}

void uniform(vk::Recorder& rec, const TensorView& out, float lo, float hi, const TensorView& rng,
             uint32_t stream) {
  const uint32_t n = streamElements("uniform", "out", out);
  checkFits("uniform", "out", out);
  checkRngState("uniform", rng);
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo))
    throw ShapeError("uniform: bounds [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     ") are not finite");
  const vk::Kernel& kernel = rec.context().kernels().get(
      "random/uniform", {{"local_size_x", workgroupSize(rec.context())}});
  const UniformPush push{n, stream, lo, hi};
  const vk::Arg args[] = {arg(out), rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     strideGroups(rec.context(), vk::divUp(n, 4)));
}

void normal(vk::Recorder& rec, const TensorView& out, float mean, float stddev,
            const TensorView& rng, uint32_t stream) {
  const uint32_t n = streamElements("normal", "out", out);
  checkFits("normal", "out", out);
  checkRngState("normal", rng);
  if (!std::isfinite(mean) || !std::isfinite(stddev))
    throw ShapeError("normal: mean " + std::to_string(mean) + " and stddev " +
                     std::to_string(stddev) + " must be finite");
  const vk::Kernel& kernel = rec.context().kernels().get(
      "random/normal", {{"local_size_x", workgroupSize(rec.context())}});
  const UniformPush push{n, stream, mean, stddev};
  const vk::Arg args[] = {arg(out), rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     strideGroups(rec.context(), vk::divUp(n, 4)));
}

void dropout(vk::Recorder& rec, const TensorView& x, const TensorView& y, float p,
             const TensorView& rng, uint32_t stream) {
  checkSameShape("dropout", "x", x, "y", y);
  streamElements("dropout", "x", x);
  checkFloat("dropout", "x", x);
  checkFloat("dropout", "y", y);
  checkInPlaceDtype("dropout", "y", y, "x", x);
  checkRngState("dropout", rng);
  checkP("dropout", p);
  recordDropout(rec, x, y, p, rng, stream, Write::Overwrite);
}

void dropoutBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx, float p,
                     const TensorView& rng, uint32_t stream, Write write) {
  checkSameShape("dropoutBackward", "dy", dy, "dx", dx);
  streamElements("dropoutBackward", "dy", dy);
  checkFloat("dropoutBackward", "dy", dy);
  checkFloat("dropoutBackward", "dx", dx);
  checkInPlaceDtype("dropoutBackward", "dx", dx, "dy", dy);
  checkRngState("dropoutBackward", rng);
  checkP("dropoutBackward", p);
  recordDropout(rec, dy, dx, p, rng, stream, write);
}

void reparameterize(vk::Recorder& rec, const TensorView& mu, const TensorView& log_sigma,
                    const TensorView& z, const TensorView& rng, uint32_t stream) {
  const char* op = "reparameterize";
  checkSameShape(op, "mu", mu, "log_sigma", log_sigma);
  checkSameShape(op, "mu", mu, "z", z);
  const uint32_t n = streamElements(op, "mu", mu);
  checkFloat(op, "mu", mu);
  checkFloat(op, "log_sigma", log_sigma);
  checkFloat(op, "z", z);
  checkInPlaceDtype(op, "z", z, "mu", mu);
  checkInPlaceDtype(op, "z", z, "log_sigma", log_sigma);
  checkRngState(op, rng);
  vk::Context& ctx = rec.context();
  const vk::Kernel& kernel = floatKernel(
      ctx, "random/reparameterize", {{"local_size_x", workgroupSize(ctx)}},
      {{"mu_dtype", mu.dtype}, {"log_sigma_dtype", log_sigma.dtype}, {"z_dtype", z.dtype}});
  const Bound bm = bindStorage(ctx, mu), bl = bindStorage(ctx, log_sigma), bz = bindStorage(ctx, z);
  const ReparameterizePush push{n, stream, {bm.skip, bl.skip, bz.skip}};
  const vk::Arg args[] = {bm.arg, bl.arg, bz.arg, rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     strideGroups(rec.context(), vk::divUp(n, 4)));
}

void reparameterizeBackward(vk::Recorder& rec, const TensorView& dz, const TensorView& log_sigma,
                            const TensorView& dlog_sigma, const TensorView& rng, uint32_t stream,
                            Write write) {
  const char* op = "reparameterizeBackward";
  checkSameShape(op, "dz", dz, "log_sigma", log_sigma);
  checkSameShape(op, "dz", dz, "dlog_sigma", dlog_sigma);
  const uint32_t n = streamElements(op, "dz", dz);
  checkFloat(op, "dz", dz);
  checkFloat(op, "log_sigma", log_sigma);
  checkFloat(op, "dlog_sigma", dlog_sigma);
  checkInPlaceDtype(op, "dlog_sigma", dlog_sigma, "dz", dz);
  checkInPlaceDtype(op, "dlog_sigma", dlog_sigma, "log_sigma", log_sigma);
  checkRngState(op, rng);
  vk::Context& ctx = rec.context();
  const vk::Kernel& kernel = floatKernel(
      ctx, "random/reparameterize_backward",
      {{"local_size_x", workgroupSize(ctx)}, {"kAccumulate", write == Write::Accumulate}},
      {{"dz_dtype", dz.dtype},
       {"log_sigma_dtype", log_sigma.dtype},
       {"dlog_sigma_dtype", dlog_sigma.dtype}});
  const Bound bd = bindStorage(ctx, dz), bl = bindStorage(ctx, log_sigma),
              bg = bindStorage(ctx, dlog_sigma);
  const ReparameterizePush push{n, stream, {bd.skip, bl.skip, bg.skip}};
  const vk::Arg args[] = {bd.arg, bl.arg, bg.arg, rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     strideGroups(rec.context(), vk::divUp(n, 4)));
}

void categorical(vk::Recorder& rec, const TensorView& weights, const TensorView& out,
                 const TensorView& rng, uint32_t stream) {
  const std::string shapes = weights.shape.str() + " -> " + out.shape.str();
  if (weights.shape.rank() < 1 || weights.shape.numel() == 0)
    throw ShapeError("categorical: weights " + weights.shape.str() + " must be non-empty (...,V)");
  if (out.shape.numel() != weights.shape.rows())
    throw ShapeError("categorical: " + shapes + ": out needs one id per row (" +
                     std::to_string(weights.shape.rows()) + ")");
  if (weights.shape.numel() > int64_t(UINT32_MAX))
    throw ShapeError("categorical: weights " + weights.shape.str() + " exceed 2^32 elements");
  checkFits("categorical", "weights", weights);
  checkFits("categorical", "out", out, DType::U32);
  checkRngState("categorical", rng);
  const vk::Kernel& kernel =
      rec.context().kernels().get("random/categorical", {{"local_size_x", 64u}});
  const CategoricalPush push{uint32_t(weights.shape.rows()), uint32_t(weights.shape.back()),
                             stream};
  const vk::Arg args[] = {arg(weights), arg(out), rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     std::min<uint32_t>(vk::divUp(push.rows, 64), kMaxStrideGroups));
}

void rngAdvance(vk::Recorder& rec, const TensorView& rng, uint32_t steps) {
  checkRngState("rngAdvance", rng);
  const vk::Kernel& kernel = rec.context().kernels().get("random/advance");
  const AdvancePush push{steps};
  const vk::Arg args[] = {rngArg(rng)};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), 1);
}

}  // namespace vkgrad::ops
