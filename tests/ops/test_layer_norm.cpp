#include "vkgrad/ops/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/not_run.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/layer_norm.h"

namespace vkgrad::test {
namespace {

// y is O(gamma * 3) and carries the rounding of x - mean, of the two row sums (1e5 terms
// at most, per-lane partial sums then a tree) and of 1/sqrt: a few ulp relative to the
// largest output. Errors seen on lavapipe stay below 5e-7 of the largest output.
constexpr double kTolerance = 2e-6;
constexpr float kEps = 1e-5f;

struct Inputs {
  ops::Shape shape;
  std::vector<float> x, gamma, beta;
  int64_t rows() const { return shape.rows(); }
  int64_t n() const { return shape.back(); }
};

struct Outputs {
  std::vector<float> y, mean, rstd;
};

Inputs randomInputs(Rng& rng, ops::Shape shape, float offset, float stddev) {
  return {shape, rng.normal(shape.numel(), offset, stddev), rng.uniform(shape.back(), 0.5f, 1.5f),
          rng.uniform(shape.back(), -0.5f, 0.5f)};
}

Outputs runLayerNorm(vk::Context& context, const Inputs& in, ops::LayerNormVariant variant) {
  auto x = upload(context, in.shape, in.x);
  auto gamma = upload(context, {in.n()}, in.gamma), beta = upload(context, {in.n()}, in.beta);
  auto y = poisoned(context, in.shape);
  auto mean = poisoned(context, {in.rows()}), rstd = poisoned(context, {in.rows()});
  vk::Recorder rec(context);
  ops::layerNorm(rec, x.view(), gamma.view(), beta.view(), y.view(), mean.view(), rstd.view(), kEps,
                 variant);
  EXPECT_EQ(rec.dispatchCount(), 1u);
  rec.submit();
  return {download(context, y), download(context, mean), download(context, rstd)};
}

Outputs reference(const Inputs& in) {
  Outputs out{std::vector<float>(in.x.size()), std::vector<float>(in.rows()),
              std::vector<float>(in.rows())};
  ops::ref::layerNorm(in.x.data(), in.gamma.data(), in.beta.data(), out.y.data(), out.mean.data(),
                      out.rstd.data(), in.rows(), in.n(), kEps);
  return out;
}

// The mean is a sum of n values divided by n; its rounding error scales with the values
// summed, not with the mean, which may be ~0 where the values are not. So it is compared
// relative to the largest |x| (or the largest |mean|, whichever is bigger).
::testing::AssertionResult meanClose(const std::vector<float>& got, const std::vector<float>& want,
                                     const std::vector<float>& x, double tolerance) {
  double scale = 0.0;
  for (float v : x) scale = std::max(scale, double(std::fabs(v)));
  for (float v : want) scale = std::max(scale, double(std::fabs(v)));
  std::vector<float> scaled_got, scaled_want;
  for (size_t i = 0; i < got.size(); ++i) {
    scaled_got.push_back(float(got[i] / scale));
    scaled_want.push_back(float(want[i] / scale));
  }
  scaled_got.push_back(1.0f);  // pins allClose's normalisation to scale
  scaled_want.push_back(1.0f);
  return allClose(scaled_got, scaled_want, tolerance);
}

void expectMatchesReference(const Inputs& in, const Outputs& got) {
  const Outputs want = reference(in);
  EXPECT_TRUE(allClose(got.y, want.y, kTolerance)) << "y";
  EXPECT_TRUE(meanClose(got.mean, want.mean, in.x, kTolerance)) << "mean";
  // rstd is 1/sqrt of the variance sum: a few ulp relative.
  EXPECT_TRUE(allClose(got.rstd, want.rstd, kTolerance)) << "rstd";
}

class LayerNormTest : public VkTest, public ::testing::WithParamInterface<ops::LayerNormVariant> {
 protected:
  // The subgroup-per-row variants are only promised where a workgroup of subgroupSize
  // invocations is one subgroup (CPU drivers; most GPUs too). They run on every device here:
  // a device that breaks the promise fails these tests rather than skipping them.
  Outputs run(const Inputs& in) { return runLayerNorm(ctx(), in, GetParam()); }
};

TEST_P(LayerNormTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Short rows take the invocation-per-row path, long ones a workgroup (or subgroup) per
  // row; the switch is at N = 32 on GPUs and 64 on CPU devices. N = 1 has zero variance:
  // y = beta, rstd = 1/sqrt(eps).
  const ops::Shape shapes[] = {{1, 1},     {3, 7},  {33, 257}, {5, 1000}, {2, 100003}, {1000, 7},
                               {2, 3, 17}, {4, 32}, {4, 33},   {4, 64},   {4, 65},     {7}};
  const vk::DeviceInfo& info = ctx().info();
  for (const ops::Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    // Within 4 storage buffers (Vulkan's minimum) the ".sb4" build reads gamma and beta through
    // texel views, so rows longer than one holds (vulkan12-minimum: 65,536) are refused there.
    if (info.max_storage_buffers < 6 && uint64_t(shape.back()) > info.max_texel_buffer_elements) {
      noteNotRun("rows of " + std::to_string(shape.back()) + " (gamma and beta read as texels)",
                 "maxTexelBufferElements");
      continue;
    }
    const Inputs in = randomInputs(rng, shape, 0.3f, 1.5f);
    expectMatchesReference(in, run(in));
  }
}

TEST_P(LayerNormTest, HandlesManyShortRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // More rows than a grid of 65535 invocations: the row loop must stride.
  const Inputs in = randomInputs(rng, {100000, 7}, 0.0f, 1.0f);
  expectMatchesReference(in, run(in));
}

TEST_P(LayerNormTest, VarianceIsStableUnderLargeOffset) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // 1000 + noise of std 0.01: E[x^2] - E[x]^2 in fp32 would take the difference of two
  // numbers near 1e6 whose ulp (0.06) is 600x the variance (1e-4), i.e. noise. A mean
  // rounded to fp32 (ulp 6e-5 at 1000) would still cost 3e-3 in y.
  for (const ops::Shape& shape : {ops::Shape{8, 7}, ops::Shape{33, 257}, ops::Shape{3, 20000}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, 1000.0f, 0.01f);
    expectMatchesReference(in, run(in));
  }
}

TEST_P(LayerNormTest, GivesTheSameBitsTwice) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // No atomics and a fixed combine order: a rerun reproduces every bit.
  for (const ops::Shape& shape : {ops::Shape{50, 7}, ops::Shape{9, 4097}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, 0.0f, 1.0f);
    const Outputs a = run(in), b = run(in);
    EXPECT_EQ(std::memcmp(a.y.data(), b.y.data(), a.y.size() * 4), 0);
    EXPECT_EQ(std::memcmp(a.mean.data(), b.mean.data(), a.mean.size() * 4), 0);
    EXPECT_EQ(std::memcmp(a.rstd.data(), b.rstd.data(), a.rstd.size() * 4), 0);
  }
}

TEST_P(LayerNormTest, RunsInPlaceAndTakesLeadingDimsForStats) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{2, 3, 5}, ops::Shape{2, 3, 300}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, -0.2f, 2.0f);
    auto x = upload(ctx(), shape, in.x);
    auto gamma = upload(ctx(), {in.n()}, in.gamma), beta = upload(ctx(), {in.n()}, in.beta);
    auto mean = poisoned(ctx(), {shape[0], shape[1]}), rstd = poisoned(ctx(), {shape[0], shape[1]});
    vk::Recorder rec(ctx());
    ops::layerNorm(rec, x.view(), gamma.view(), beta.view(), x.view(), mean.view(), rstd.view(),
                   kEps, GetParam());
    rec.submit();
    expectMatchesReference(in, {download(ctx(), x), download(ctx(), mean), download(ctx(), rstd)});
  }
}

// y, mean and rstd written into buffers with `pad` NaN words before and after each: the
// outputs without the pads, and a failure if anything was written into a pad.
Outputs unpaddedOutputs(vk::Context& context, const DeviceTensor& y, const DeviceTensor& mean,
                        const DeviceTensor& rstd, int64_t pad) {
  Outputs got;
  for (auto [out, dev] : {std::pair{&got.y, &y}, {&got.mean, &mean}, {&got.rstd, &rstd}}) {
    const auto all = download(context, *dev);
    EXPECT_TRUE(padsUntouched(all, pad));
    *out = unpadded(all, pad);
  }
  return got;
}

TEST_P(LayerNormTest, ReadsViewsAtOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Every tensor is the middle of a larger buffer, at an offset the device allows for
  // storage buffers; the elements around the outputs must stay untouched.
  const int64_t pad = int64_t(ctx().info().min_storage_offset_alignment) / 4 * 3;
  for (const ops::Shape& shape : {ops::Shape{5, 9}, ops::Shape{5, 300}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, 0.1f, 1.0f);
    auto x = paddedUpload(ctx(), in.x, pad), gamma = paddedUpload(ctx(), in.gamma, pad),
         beta = paddedUpload(ctx(), in.beta, pad);
    auto y = poisoned(ctx(), {shape.numel() + 2 * pad});
    auto mean = poisoned(ctx(), {shape.rows() + 2 * pad}),
         rstd = poisoned(ctx(), {shape.rows() + 2 * pad});
    const uint64_t off = pad * 4;
    vk::Recorder rec(ctx());
    ops::layerNorm(rec, ops::view(x.buffer, shape, off), ops::view(gamma.buffer, {in.n()}, off),
                   ops::view(beta.buffer, {in.n()}, off), ops::view(y.buffer, shape, off),
                   ops::view(mean.buffer, {in.rows()}, off),
                   ops::view(rstd.buffer, {in.rows()}, off), kEps, GetParam());
    rec.submit();
    expectMatchesReference(in, unpaddedOutputs(ctx(), y, mean, rstd, pad));
  }
}

// y (and the statistics) one float past an aligned start while x, gamma and beta are
// aligned: the texel layouts fetch 4 columns at a time but store y one float at a time. The
// GPT's shape and an odd row count.
TEST_P(LayerNormTest, StoresYAtAFourByteOffset) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{768, 128}, ops::Shape{37, 68}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, 0.1f, 1.0f);
    auto x = upload(ctx(), shape, in.x);
    auto gamma = upload(ctx(), {in.n()}, in.gamma), beta = upload(ctx(), {in.n()}, in.beta);
    auto y = poisoned(ctx(), {shape.numel() + 2}), mean = poisoned(ctx(), {shape.rows() + 2}),
         rstd = poisoned(ctx(), {shape.rows() + 2});
    vk::Recorder rec(ctx());
    ops::layerNorm(rec, x.view(), gamma.view(), beta.view(), ops::view(y.buffer, shape, 4),
                   ops::view(mean.buffer, {in.rows()}, 4), ops::view(rstd.buffer, {in.rows()}, 4),
                   kEps, GetParam());
    rec.submit();
    expectMatchesReference(in, unpaddedOutputs(ctx(), y, mean, rstd, 1));
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LayerNormTest,
                         ::testing::Values(ops::LayerNormVariant::Auto,
                                           ops::LayerNormVariant::WorkgroupStorage,
                                           ops::LayerNormVariant::WorkgroupTexel,
                                           ops::LayerNormVariant::SubgroupStorage,
                                           ops::LayerNormVariant::SubgroupTexel),
                         [](const auto& info) { return ops::layerNormVariantName(info.param); });

TEST_F(VkTest, LayerNormRejectsBadShapesBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 7}, rng.uniform(28));
  auto g7 = upload(ctx(), {7}, rng.uniform(7)), g8 = upload(ctx(), {8}, rng.uniform(8));
  auto y = poisoned(ctx(), {4, 7}), y8 = poisoned(ctx(), {4, 8});
  auto m4 = poisoned(ctx(), {4}), m5 = poisoned(ctx(), {5}), m3 = poisoned(ctx(), {3});
  auto expectError = [&](const ops::TensorView& xv, const ops::TensorView& gamma,
                         const ops::TensorView& beta, const ops::TensorView& yv,
                         const ops::TensorView& mean, const ops::TensorView& rstd, float eps,
                         const std::string& expected) {
    SCOPED_TRACE(expected);
    vk::Recorder rec(ctx());
    try {
      ops::layerNorm(rec, xv, gamma, beta, yv, mean, rstd, eps);
      ADD_FAILURE() << "no ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  };
  const auto xv = x.view(), gv = g7.view(), yv = y.view(), mv = m4.view();
  expectError(xv, g8.view(), gv, yv, mv, mv, kEps, "layerNorm: x (4,7) needs gamma (7), got (8)");
  expectError(xv, gv, g8.view(), yv, mv, mv, kEps, "layerNorm: x (4,7) needs beta (7), got (8)");
  expectError(xv, gv, gv, y8.view(), mv, mv, kEps,
              "layerNorm: x (4,7) needs y shaped like x, got (4,8)");
  expectError(xv, gv, gv, yv, m5.view(), mv, kEps, "layerNorm: x (4,7) needs mean (4), got (5)");
  expectError(xv, gv, gv, yv, mv, ops::view(m4.buffer, {4, 1}), kEps,
              "layerNorm: x (4,7) needs rstd (4), got (4,1)");
  expectError(xv, gv, gv, yv, mv, mv, -1.0f, "layerNorm: x (4,7): eps must be finite and >= 0");
  expectError(ops::view(x.buffer, {4, 0}), ops::view(g7.buffer, {0}), ops::view(g7.buffer, {0}), yv,
              mv, mv, kEps, "layerNorm: x (4,0) is empty");
  // Right shape, but the buffer behind rstd holds only 3 floats.
  expectError(xv, gv, gv, yv, mv, ops::view(m3.buffer, {4}), kEps,
              "layerNorm: rstd (4) at offset 0 needs 16 bytes");
}

// dx is rstd * (g - mean(g) - xhat * mean(g xhat)): a difference of terms of size ~rstd * |g|
// from two compensated row sums, so a few ulp of the largest |dx|; dgamma and dbeta are
// compensated column sums, a few ulp of the largest sum. Errors seen on lavapipe stay below
// 6e-7 when GPU and reference get the same saved statistics.
constexpr double kBackwardTolerance = 2e-6;

struct Grads {
  std::vector<float> dx, dgamma, dbeta;
};

// The backward's inputs beside Inputs: dy, and the statistics the CPU forward saves.
struct BackwardInputs {
  Inputs in;
  std::vector<float> dy, mean, rstd;
};

BackwardInputs randomBackwardInputs(Rng& rng, ops::Shape shape, float offset, float stddev) {
  BackwardInputs b{randomInputs(rng, shape, offset, stddev), rng.normal(shape.numel()), {}, {}};
  const Outputs stats = reference(b.in);
  b.mean = stats.mean;
  b.rstd = stats.rstd;
  return b;
}

Grads referenceGrads(const BackwardInputs& b) {
  const Inputs& in = b.in;
  Grads g{std::vector<float>(in.x.size()), std::vector<float>(in.n()), std::vector<float>(in.n())};
  ops::ref::layerNormBackward(in.x.data(), in.gamma.data(), b.mean.data(), b.rstd.data(),
                              b.dy.data(), g.dx.data(), g.dgamma.data(), g.dbeta.data(), in.rows(),
                              in.n());
  return g;
}

struct BackwardOptions {
  ops::LayerNormVariant variant = ops::LayerNormVariant::Auto;
  ops::LayerNormParamsVariant params = ops::LayerNormParamsVariant::Auto;
  ops::Write write = ops::Write::Overwrite;               // dx's, and by default the params'
  std::optional<ops::Write> params_write = std::nullopt;  // dgamma's and dbeta's, if not write
  const Grads* init = nullptr;  // the outputs' contents before an Accumulate
  bool dgamma = true, dbeta = true;
  const std::vector<float>* addend = nullptr;  // dx_addend, shaped like x
};

// The outputs start poisoned (or at init): anything the kernels fail to write shows up.
Grads runBackward(vk::Context& context, const BackwardInputs& b, const BackwardOptions& o = {}) {
  const Inputs& in = b.in;
  auto x = upload(context, in.shape, in.x), dy = upload(context, in.shape, b.dy);
  auto gamma = upload(context, {in.n()}, in.gamma);
  auto mean = upload(context, {in.rows()}, b.mean), rstd = upload(context, {in.rows()}, b.rstd);
  auto start = [&](ops::Shape shape, const std::vector<float>* init) {
    return init ? upload(context, shape, *init) : poisoned(context, shape);
  };
  auto dx = start(in.shape, o.init ? &o.init->dx : nullptr);
  auto dgamma = start({in.n()}, o.init ? &o.init->dgamma : nullptr);
  auto dbeta = start({in.n()}, o.init ? &o.init->dbeta : nullptr);
  auto scratch = poisoned(context, {ops::layerNormBackwardScratch(in.rows(), in.n())});
  auto addend = start(in.shape, o.addend);
  const ops::TensorView addend_view = addend.view();
  vk::Recorder rec(context);
  ops::layerNormBackward(rec, x.view(), gamma.view(), mean.view(), rstd.view(), dy.view(),
                         dx.view(), o.dgamma ? dgamma.view() : ops::TensorView{},
                         o.dbeta ? dbeta.view() : ops::TensorView{}, scratch.view(), o.write,
                         o.params_write.value_or(o.write), o.variant, o.params,
                         o.addend ? &addend_view : nullptr);
  rec.submit();
  return {download(context, dx), download(context, dgamma), download(context, dbeta)};
}

float maxAbs(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  return m;
}

// The scale of dx's rounding: dx = rstd (dy g - mean(dy g) - xhat mean(dy g xhat)) cancels
// to far less than its terms (exactly 0 when N = 1), and a device that fuses the products
// into the subtraction (an FMA, as NVIDIA's compiler does) leaves rounding of the terms'
// size, rstd |dy g|, where a CPU rounding each step may cancel exactly.
float dxTerm(const BackwardInputs& b) {
  const int64_t n = b.in.n();
  float term = 0;
  for (int64_t r = 0; r < b.in.rows(); ++r)
    for (int64_t c = 0; c < n; ++c)
      term = std::max(term, b.rstd[r] * std::fabs(b.dy[r * n + c] * b.in.gamma[c]));
  return term;
}

void expectGradsMatch(const Grads& got, const Grads& want, double tolerance,
                      const BackwardInputs& b) {
  EXPECT_TRUE(allCloseOnScale(got.dx, want.dx, dxTerm(b), tolerance)) << "dx";
  // dgamma and dbeta are column sums whose terms may cancel (17 rows of |dy| ~ 1 summing to
  // 0.05): normalised by at least the largest term, as their rounding is.
  const float term = maxAbs(b.dy);
  EXPECT_TRUE(allCloseOnScale(got.dgamma, want.dgamma, term, tolerance)) << "dgamma";
  EXPECT_TRUE(allCloseOnScale(got.dbeta, want.dbeta, term, tolerance)) << "dbeta";
}

class LayerNormBackwardTest : public LayerNormTest {};

TEST_P(LayerNormBackwardTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Rows 1, 3, 17, 129 against columns 1, 7, 129, 1000+; short rows take the
  // invocation-per-row path, N % 4 == 0 (1000, 68) RGBA32F fetches in the texel layouts.
  // N = 1 has xhat = 0: dx and dgamma are exactly 0 up to rounding on dxTerm's scale.
  const ops::Shape shapes[] = {{1, 1},  {3, 7},   {17, 129},  {129, 1001}, {129, 7}, {1, 1000},
                               {17, 1}, {3, 129}, {2, 3, 17}, {4, 65},     {5, 68}};
  for (const ops::Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    const BackwardInputs b = randomBackwardInputs(rng, shape, 0.3f, 1.5f);
    expectGradsMatch(runBackward(ctx(), b, {.variant = GetParam()}), referenceGrads(b),
                     kBackwardTolerance, b);
  }
}

// dx_addend (a residual stream's gradient) added to dx in both write modes, on every
// variant: against the reference plus the addend (and dx's old contents), and bit for bit
// against the path it replaces, the addend copied into dx and the kernel accumulating.
TEST_P(LayerNormBackwardTest, AddsAnAddendToDxInBothWriteModes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shapes[] = {{37, 128}, {3, 7}, {5, 68}, {2, 3, 17}};
  for (const ops::Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    const BackwardInputs b = randomBackwardInputs(rng, shape, 0.3f, 1.5f);
    const std::vector<float> addend = rng.normal(shape.numel());
    Grads init{rng.normal(shape.numel()), rng.normal(shape[shape.rank() - 1]),
               rng.normal(shape[shape.rank() - 1])};
    const Grads ref = referenceGrads(b);
    const float scale = std::max({dxTerm(b), maxAbs(addend), maxAbs(init.dx)});
    for (ops::Write w : {ops::Write::Overwrite, ops::Write::Accumulate}) {
      SCOPED_TRACE(w == ops::Write::Overwrite ? "overwrite" : "accumulate");
      const Grads got = runBackward(
          ctx(), b, {.variant = GetParam(), .write = w, .init = &init, .addend = &addend});
      std::vector<float> want = ref.dx;
      for (size_t i = 0; i < want.size(); ++i)
        want[i] += addend[i] + (w == ops::Write::Accumulate ? init.dx[i] : 0.0f);
      EXPECT_TRUE(allCloseOnScale(got.dx, want, scale, kBackwardTolerance));
    }
    // The replaced path: dx holds the addend, and the kernel adds to it.
    Grads copied = init;
    copied.dx = addend;
    const Grads fused = runBackward(ctx(), b, {.variant = GetParam(), .addend = &addend});
    const Grads added = runBackward(ctx(), b,
                                    {.variant = GetParam(),
                                     .write = ops::Write::Accumulate,
                                     .params_write = ops::Write::Overwrite,
                                     .init = &copied});
    ASSERT_EQ(fused.dx.size(), added.dx.size());
    EXPECT_EQ(std::memcmp(fused.dx.data(), added.dx.data(), fused.dx.size() * 4), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LayerNormBackwardTest,
                         ::testing::Values(ops::LayerNormVariant::Auto,
                                           ops::LayerNormVariant::WorkgroupStorage,
                                           ops::LayerNormVariant::WorkgroupTexel,
                                           ops::LayerNormVariant::SubgroupStorage,
                                           ops::LayerNormVariant::SubgroupTexel),
                         [](const auto& info) { return ops::layerNormVariantName(info.param); });

using LayerNormBackward = VkTest;

// got = want + init, normalised by the largest |want| or |init|: the sum may cancel.
TEST_F(LayerNormBackward, ParamsVariantsMatchCpuInBothWriteModes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Blocked and WithDx sum blocks of 64 rows: 129 rows end in a block of one, 64 is exactly
  // one block. WithDx applies where N % 4 == 0 and N <= 32 per subgroup lane (128, 256, 4 on
  // lavapipe); the other shapes take Blocked instead.
  const ops::Shape shapes[] = {{1, 7},       {64, 3},    {129, 129}, {200, 1},
                               {3, 5, 1000}, {129, 128}, {7, 256},   {64, 4}};
  for (auto params : {ops::LayerNormParamsVariant::Columns, ops::LayerNormParamsVariant::Blocked,
                      ops::LayerNormParamsVariant::WithDx})
    for (const ops::Shape& shape : shapes) {
      SCOPED_TRACE(testing::Message()
                   << ops::layerNormParamsVariantName(params) << " " << shape.str());
      const BackwardInputs b = randomBackwardInputs(rng, shape, -0.4f, 0.7f);
      const Grads want = referenceGrads(b);
      // dgamma and dbeta sum columns whose terms may cancel (200 rows of |dy| ~ 1 summing to
      // 0.07): their rounding is on the terms' scale, as in expectGradsMatch.
      const float term = maxAbs(b.dy);
      expectGradsMatch(runBackward(ctx(), b, {.params = params}), want, kBackwardTolerance, b);
      const Grads init{rng.uniform(shape.numel()), rng.uniform(shape.back()),
                       rng.uniform(shape.back())};
      const Grads got =
          runBackward(ctx(), b, {.params = params, .write = ops::Write::Accumulate, .init = &init});
      EXPECT_TRUE(accumulatedClose(got.dx, want.dx, init.dx, kBackwardTolerance, dxTerm(b)))
          << "dx";
      EXPECT_TRUE(accumulatedClose(got.dgamma, want.dgamma, init.dgamma, kBackwardTolerance, term))
          << "dgamma";
      EXPECT_TRUE(accumulatedClose(got.dbeta, want.dbeta, init.dbeta, kBackwardTolerance, term))
          << "dbeta";
      // Mixed: dx adds (a residual stream), dgamma and dbeta are written; and the reverse.
      const Grads mixed = runBackward(ctx(), b,
                                      {.params = params,
                                       .write = ops::Write::Accumulate,
                                       .params_write = ops::Write::Overwrite,
                                       .init = &init});
      EXPECT_TRUE(accumulatedClose(mixed.dx, want.dx, init.dx, kBackwardTolerance, dxTerm(b)))
          << "dx";
      expectGradsMatch({want.dx, mixed.dgamma, mixed.dbeta}, want, kBackwardTolerance, b);
      const Grads reverse = runBackward(ctx(), b,
                                        {.params = params,
                                         .write = ops::Write::Overwrite,
                                         .params_write = ops::Write::Accumulate,
                                         .init = &init});
      EXPECT_TRUE(allCloseOnScale(reverse.dx, want.dx, dxTerm(b), kBackwardTolerance)) << "dx";
      EXPECT_TRUE(
          accumulatedClose(reverse.dgamma, want.dgamma, init.dgamma, kBackwardTolerance, term))
          << "dgamma";
      EXPECT_TRUE(accumulatedClose(reverse.dbeta, want.dbeta, init.dbeta, kBackwardTolerance, term))
          << "dbeta";
    }
}

// WithDx's dx kernel computes dx exactly as without the parameter sums: the same bits, at the
// GPT's shape and an odd row count, with an addend.
TEST_F(LayerNormBackward, WithDxWritesTheSameDx) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{768, 128}, ops::Shape{37, 68}}) {
    SCOPED_TRACE(shape.str());
    const BackwardInputs b = randomBackwardInputs(rng, shape, 0.3f, 1.5f);
    const std::vector<float> addend = rng.normal(shape.numel());
    const Grads with_dx =
        runBackward(ctx(), b, {.params = ops::LayerNormParamsVariant::WithDx, .addend = &addend});
    const Grads columns =
        runBackward(ctx(), b, {.params = ops::LayerNormParamsVariant::Columns, .addend = &addend});
    EXPECT_EQ(std::memcmp(with_dx.dx.data(), columns.dx.data(), with_dx.dx.size() * 4), 0);
    expectGradsMatch({columns.dx, with_dx.dgamma, with_dx.dbeta}, columns, kBackwardTolerance, b);
  }
}

TEST_F(LayerNormBackward, LeavesOutParamGradsNotAskedFor) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto params : {ops::LayerNormParamsVariant::Columns, ops::LayerNormParamsVariant::Blocked,
                      ops::LayerNormParamsVariant::WithDx})
    for (auto [want_gamma, want_beta] : {std::pair{true, false}, {false, true}, {false, false}})
      for (int64_t n : {9, 72}) {  // 72: the RGBA32F layouts, WithDx's where it applies
        SCOPED_TRACE(testing::Message() << ops::layerNormParamsVariantName(params) << " dgamma "
                                        << want_gamma << " dbeta " << want_beta << " N " << n);
        const BackwardInputs b = randomBackwardInputs(rng, {70, n}, 0.0f, 1.0f);
        const Grads want = referenceGrads(b);
        const Grads got =
            runBackward(ctx(), b, {.params = params, .dgamma = want_gamma, .dbeta = want_beta});
        EXPECT_TRUE(allClose(got.dx, want.dx, kBackwardTolerance)) << "dx";
        // An output not asked for keeps its poison.
        for (auto [asked, out, ref] : {std::tuple{want_gamma, &got.dgamma, &want.dgamma},
                                       {want_beta, &got.dbeta, &want.dbeta}}) {
          if (asked) {
            EXPECT_TRUE(allClose(*out, *ref, kBackwardTolerance));
          } else {
            for (float v : *out) EXPECT_TRUE(std::isnan(v));
          }
        }
      }
}

TEST_F(LayerNormBackward, HandlesManyRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // More rows than Columns takes on a CPU device (16384), so Auto sums in blocks there;
  // dgamma and dbeta sum 20000 terms.
  const BackwardInputs b = randomBackwardInputs(rng, {20000, 7}, 0.0f, 1.0f);
  expectGradsMatch(runBackward(ctx(), b), referenceGrads(b), kBackwardTolerance, b);
}

TEST_F(LayerNormBackward, GivesTheSameBitsTwice) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto params : {ops::LayerNormParamsVariant::Columns, ops::LayerNormParamsVariant::Blocked}) {
    const BackwardInputs b = randomBackwardInputs(rng, {130, 257}, 0.0f, 1.0f);
    const Grads g1 = runBackward(ctx(), b, {.params = params}),
                g2 = runBackward(ctx(), b, {.params = params});
    EXPECT_EQ(std::memcmp(g1.dx.data(), g2.dx.data(), g1.dx.size() * 4), 0);
    EXPECT_EQ(std::memcmp(g1.dgamma.data(), g2.dgamma.data(), g1.dgamma.size() * 4), 0);
    EXPECT_EQ(std::memcmp(g1.dbeta.data(), g2.dbeta.data(), g1.dbeta.size() * 4), 0);
  }
}

// Data far from zero: x = 1000 + N(0,1). The GPU gets the statistics its own forward saved,
// the reference recomputes them in double from x. The saved mean is fp32 (ulp 6e-5 at 1000),
// so xhat = (x - mean) * rstd is off by up to ~3e-5 for the whole row; dx and dgamma carry
// that (seen up to 6e-5 normalised on lavapipe), hence 2e-4 here instead of 2e-6.
TEST_F(LayerNormBackward, ToleratesLargeCommonOffset) {
  constexpr double kOffsetTolerance = 2e-4;
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{17, 7}, ops::Shape{33, 1000}}) {
    SCOPED_TRACE(shape.str());
    BackwardInputs b = randomBackwardInputs(rng, shape, 1000.0f, 1.0f);
    const Outputs stats = runLayerNorm(ctx(), b.in, ops::LayerNormVariant::Auto);
    b.mean = stats.mean;
    b.rstd = stats.rstd;
    const Grads got = runBackward(ctx(), b);
    Grads exact{std::vector<float>(b.in.x.size()), std::vector<float>(b.in.n()),
                std::vector<float>(b.in.n())};
    ops::ref::layerNormBackward(b.in.x.data(), b.in.gamma.data(), nullptr, nullptr, b.dy.data(),
                                exact.dx.data(), exact.dgamma.data(), exact.dbeta.data(),
                                b.in.rows(), b.in.n(), kEps);
    expectGradsMatch(got, exact, kOffsetTolerance, b);
  }
}

// loss = sum w * y with the GPU forward; the analytic gradients are the GPU backward's with
// dy = w, fed the statistics the GPU forward saved.
TEST_F(LayerNormBackward, PassesGradCheck) {
  constexpr auto kAuto = ops::LayerNormVariant::Auto;
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{3, 7}, ops::Shape{4, 129}}) {
    SCOPED_TRACE(shape.str());
    Inputs in = randomInputs(rng, shape, 0.2f, 1.0f);
    const std::vector<float> w = rng.uniform(shape.numel());
    auto loss = [&] { return weightedSum(runLayerNorm(ctx(), in, kAuto).y, w); };
    const Outputs stats = runLayerNorm(ctx(), in, kAuto);
    const Grads g = runBackward(ctx(), {in, w, stats.mean, stats.rstd});
    EXPECT_TRUE(checkGradients(
        loss, {{"x", &in.x, g.dx}, {"gamma", &in.gamma, g.dgamma}, {"beta", &in.beta, g.dbeta}},
        rng));
  }
}

// Every view at an offset of 1 to 3 floats inside a larger buffer (any multiple of 4 bytes
// must work, for the forward too); nothing outside the views may be written.
TEST_F(LayerNormBackward, ForwardAndBackwardTakeAnyOffset) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  constexpr float kSentinel = 12345.0f;
  for (auto variant : {ops::LayerNormVariant::Auto, ops::LayerNormVariant::WorkgroupStorage})
    for (const ops::Shape& shape : {ops::Shape{5, 9}, ops::Shape{70, 300}}) {
      SCOPED_TRACE(testing::Message() << ops::layerNormVariantName(variant) << " " << shape.str());
      const BackwardInputs b = randomBackwardInputs(rng, shape, 0.1f, 1.0f);
      const Inputs& in = b.in;
      int64_t next = 0;
      struct Placed {
        DeviceTensor whole;
        ops::TensorView view;
        int64_t at, n;
      };
      auto place = [&](ops::Shape s, const std::vector<float>* data) {
        const int64_t at = 1 + next++ % 3, n = s.numel();
        std::vector<float> all(at + n + 5, kSentinel);
        if (data)
          std::copy(data->begin(), data->end(), all.begin() + at);
        else
          std::fill(all.begin() + at, all.begin() + at + n, std::nanf(""));
        Placed p{upload(ctx(), {int64_t(all.size())}, all), {}, at, n};
        p.view = ops::view(p.whole.buffer, s, uint64_t(at) * 4);
        return p;
      };
      auto read = [&](const Placed& p) {
        const auto all = download(ctx(), p.whole);
        for (int64_t i = 0; i < int64_t(all.size()); ++i)
          if (i < p.at || i >= p.at + p.n) {
            EXPECT_EQ(all[i], kSentinel) << "margin " << i;
          }
        return std::vector<float>(all.begin() + p.at, all.begin() + p.at + p.n);
      };
      const int64_t rows = in.rows(), n = in.n();
      auto x = place(shape, &in.x), gamma = place({n}, &in.gamma), beta = place({n}, &in.beta);
      auto y = place(shape, nullptr), mean = place({rows}, nullptr), rstd = place({rows}, nullptr);
      auto dy = place(shape, &b.dy), dx = place(shape, nullptr);
      auto dgamma = place({n}, nullptr), dbeta = place({n}, nullptr);
      auto scratch = place({ops::layerNormBackwardScratch(rows, n)}, nullptr);
      vk::Recorder rec(ctx());
      ops::layerNorm(rec, x.view, gamma.view, beta.view, y.view, mean.view, rstd.view, kEps,
                     variant);
      ops::layerNormBackward(rec, x.view, gamma.view, mean.view, rstd.view, dy.view, dx.view,
                             dgamma.view, dbeta.view, scratch.view, ops::Write::Overwrite,
                             ops::Write::Overwrite, variant, ops::LayerNormParamsVariant::Blocked);
      rec.submit();
      expectMatchesReference(in, {read(y), read(mean), read(rstd)});
      BackwardInputs used = b;  // the backward read the GPU's statistics
      used.mean = read(mean);
      used.rstd = read(rstd);
      expectGradsMatch({read(dx), read(dgamma), read(dbeta)}, referenceGrads(used),
                       kBackwardTolerance, b);
      read(scratch);
    }
}

// Formats of one 16-bit case: x and dy; y and dx; gamma, beta, dgamma and dbeta; mean and rstd.
struct SixteenBitCase {
  ops::DType in, out, params, stats;
};
using ops::DType;
constexpr SixteenBitCase kSixteenBitCases[] = {
    {DType::F16, DType::F16, DType::F16, DType::F16},
    {DType::BF16, DType::BF16, DType::BF16, DType::BF16},
    {DType::BF16, DType::BF16, DType::F32, DType::F32},  // f32 parameters, bf16 activations
    {DType::F32, DType::BF16, DType::F32, DType::BF16},  // f32 inputs (texels), 16-bit outputs
    {DType::F16, DType::F32, DType::BF16, DType::F32}};

std::string describe(const SixteenBitCase& f) {
  return std::string("x ") + ops::dtypeName(f.in) + ", y " + ops::dtypeName(f.out) + ", params " +
         ops::dtypeName(f.params) + ", stats " + ops::dtypeName(f.stats);
}

// closeInFormat with the f32 tolerance relative to at least `scale` (appended to both sides,
// as meanClose does): for sums whose terms are larger than the result.
::testing::AssertionResult closeOnScale(std::vector<float> got, std::vector<float> want,
                                        DType dtype, float scale, double tolerance) {
  got.push_back(scale);
  want.push_back(scale);
  return closeInFormat(got, want, dtype, tolerance);
}

// Every tensor in f16 or bf16, and mixed with f32 (f32 parameters with bf16 activations, f32
// inputs with 16-bit outputs), rows of 1 to 1000 columns. The reference runs on the rounded
// inputs; the arithmetic and the statistics are f32, so each output keeps the f32 test's
// tolerance plus the one rounding of its store (closeInFormat), the mean on the scale of x as
// in the f32 tests.
TEST_F(VkTest, LayerNormSixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shapes[] = {{1, 1}, {3, 7}, {17, 129}, {5, 1000}, {2, 3, 17}, {9, 68}};
  for (const SixteenBitCase& f : kSixteenBitCases)
    for (const auto variant : {ops::LayerNormVariant::Auto, ops::LayerNormVariant::WorkgroupStorage,
                               ops::LayerNormVariant::SubgroupStorage})
      for (const ops::Shape& shape : shapes) {
        SCOPED_TRACE(testing::Message() << describe(f) << " " << ops::layerNormVariantName(variant)
                                        << " " << shape.str());
        Inputs in = randomInputs(rng, shape, 0.3f, 1.5f);
        in.x = ops::ref::roundTo(f.in, in.x);
        in.gamma = ops::ref::roundTo(f.params, in.gamma);
        in.beta = ops::ref::roundTo(f.params, in.beta);
        const Outputs want = reference(in);
        auto x = upload(ctx(), shape, in.x, f.in);
        auto gamma = upload(ctx(), {in.n()}, in.gamma, f.params);
        auto beta = upload(ctx(), {in.n()}, in.beta, f.params);
        auto y = poisoned(ctx(), shape, f.out);
        auto mean = poisoned(ctx(), {in.rows()}, f.stats),
             rstd = poisoned(ctx(), {in.rows()}, f.stats);
        vk::Recorder rec(ctx());
        ops::layerNorm(rec, x.view(), gamma.view(), beta.view(), y.view(), mean.view(), rstd.view(),
                       kEps, variant);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), y), want.y, f.out, kTolerance)) << "y";
        EXPECT_TRUE(
            closeOnScale(download(ctx(), mean), want.mean, f.stats, maxAbs(in.x), kTolerance))
            << "mean";
        EXPECT_TRUE(closeInFormat(download(ctx(), rstd), want.rstd, f.stats, kTolerance)) << "rstd";
      }
}

// The backward in the same formats, every parameter-sum strategy (WithDx where x, dy and gamma
// are f32 texels, else Blocked in its place), both write modes. It is fed the statistics as
// the forward stores them (rounded to their format), as a training step would, and so is the
// reference. dx and the parameter sums keep the f32 test's tolerance on the scale of their
// terms, plus the rounding of their store.
TEST_F(VkTest, LayerNormBackwardSixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shapes[] = {{1, 1}, {3, 7}, {17, 129}, {2, 1000}, {65, 68}};
  for (const SixteenBitCase& f : kSixteenBitCases)
    for (const ops::Shape& shape : shapes) {
      BackwardInputs b = randomBackwardInputs(rng, shape, 0.3f, 1.5f);
      Inputs& in = b.in;
      in.x = ops::ref::roundTo(f.in, in.x);
      in.gamma = ops::ref::roundTo(f.params, in.gamma);
      b.dy = ops::ref::roundTo(f.in, b.dy);
      const Outputs stats = reference(in);
      b.mean = ops::ref::roundTo(f.stats, stats.mean);
      b.rstd = ops::ref::roundTo(f.stats, stats.rstd);
      const Grads want = referenceGrads(b);
      const Grads init{ops::ref::roundTo(f.out, rng.normal(shape.numel())),
                       ops::ref::roundTo(f.params, rng.normal(in.n())),
                       ops::ref::roundTo(f.params, rng.normal(in.n()))};
      auto x = upload(ctx(), shape, in.x, f.in), dy = upload(ctx(), shape, b.dy, f.in);
      auto gamma = upload(ctx(), {in.n()}, in.gamma, f.params);
      auto mean = upload(ctx(), {in.rows()}, b.mean, f.stats);
      auto rstd = upload(ctx(), {in.rows()}, b.rstd, f.stats);
      auto scratch = poisoned(ctx(), {ops::layerNormBackwardScratch(in.rows(), in.n())});
      for (const auto params :
           {ops::LayerNormParamsVariant::Auto, ops::LayerNormParamsVariant::Columns,
            ops::LayerNormParamsVariant::Blocked, ops::LayerNormParamsVariant::WithDx})
        for (const ops::Write w : {ops::Write::Overwrite, ops::Write::Accumulate}) {
          const bool acc = w == ops::Write::Accumulate;
          SCOPED_TRACE(testing::Message() << describe(f) << " " << shape.str() << " "
                                          << ops::layerNormParamsVariantName(params)
                                          << (acc ? " accumulate" : " overwrite"));
          auto dx = acc ? upload(ctx(), shape, init.dx, f.out) : poisoned(ctx(), shape, f.out);
          auto dgamma = acc ? upload(ctx(), {in.n()}, init.dgamma, f.params)
                            : poisoned(ctx(), {in.n()}, f.params);
          auto dbeta = acc ? upload(ctx(), {in.n()}, init.dbeta, f.params)
                           : poisoned(ctx(), {in.n()}, f.params);
          vk::Recorder rec(ctx());
          ops::layerNormBackward(rec, x.view(), gamma.view(), mean.view(), rstd.view(), dy.view(),
                                 dx.view(), dgamma.view(), dbeta.view(), scratch.view(), w, w,
                                 ops::LayerNormVariant::Auto, params);
          rec.submit();
          Grads expect = want;
          if (acc)
            for (auto [e, i] :
                 {std::pair{&expect.dx, &init.dx}, std::pair{&expect.dgamma, &init.dgamma},
                  std::pair{&expect.dbeta, &init.dbeta}})
              for (size_t k = 0; k < e->size(); ++k) (*e)[k] += (*i)[k];
          const float dx_scale = std::max(dxTerm(b), acc ? maxAbs(init.dx) : 0.0f);
          const float sum_scale = std::max(
              {maxAbs(b.dy), acc ? maxAbs(init.dgamma) : 0.0f, acc ? maxAbs(init.dbeta) : 0.0f});
          EXPECT_TRUE(
              closeOnScale(download(ctx(), dx), expect.dx, f.out, dx_scale, kBackwardTolerance))
              << "dx";
          EXPECT_TRUE(closeOnScale(download(ctx(), dgamma), expect.dgamma, f.params, sum_scale,
                                   kBackwardTolerance))
              << "dgamma";
          EXPECT_TRUE(closeOnScale(download(ctx(), dbeta), expect.dbeta, f.params, sum_scale,
                                   kBackwardTolerance))
              << "dbeta";
        }
    }
}

// bf16 views an odd number of elements (2 bytes) into their buffers, forward and backward, and
// y over x; an output in place of an input of another format is refused.
TEST_F(VkTest, LayerNormSixteenBitAtOddOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shape{5, 33};
  BackwardInputs b = randomBackwardInputs(rng, shape, 0.3f, 1.5f);
  Inputs& in = b.in;
  in.x = ops::ref::roundTo(DType::BF16, in.x);
  b.dy = ops::ref::roundTo(DType::BF16, b.dy);
  const Outputs want = reference(in);
  // v 1 element into its buffer, between two `pad`s.
  auto padded = [&](const std::vector<float>& v, float pad = 1.0f) {
    std::vector<float> all(v.size() + 2, pad);
    std::copy(v.begin(), v.end(), all.begin() + 1);
    return upload(ctx(), {int64_t(all.size())}, all, DType::BF16);
  };
  auto at = [&](const DeviceTensor& t, ops::Shape s) {
    return ops::view(t.buffer, s, 2, DType::BF16);
  };
  auto x = padded(in.x), y = padded(std::vector<float>(shape.numel()), std::nanf(""));
  auto gamma = upload(ctx(), {in.n()}, in.gamma), beta = upload(ctx(), {in.n()}, in.beta);
  auto mean = padded(std::vector<float>(in.rows(), std::nanf("")));
  auto rstd = upload(ctx(), {in.rows()}, std::vector<float>(in.rows(), std::nanf("")));
  vk::Recorder rec(ctx());
  ops::layerNorm(rec, at(x, shape), gamma.view(), beta.view(), at(y, shape), at(mean, {in.rows()}),
                 rstd.view(), kEps);
  rec.submit();
  const auto y_all = download(ctx(), y), mean_all = download(ctx(), mean);
  EXPECT_TRUE(closeInFormat(unpadded(y_all, 1), want.y, DType::BF16, kTolerance)) << "y";
  EXPECT_TRUE(padsUntouched(y_all, 1));
  EXPECT_TRUE(closeOnScale(unpadded(mean_all, 1), want.mean, DType::BF16, maxAbs(in.x), kTolerance))
      << "mean";
  EXPECT_TRUE(closeInFormat(download(ctx(), rstd), want.rstd, DType::F32, kTolerance)) << "rstd";

  b.mean = ops::ref::roundTo(DType::BF16, unpadded(mean_all, 1));
  b.rstd = download(ctx(), rstd);
  const Grads grads = referenceGrads(b);
  auto dy = padded(b.dy), dx = padded(std::vector<float>(shape.numel()), std::nanf(""));
  auto dgamma = poisoned(ctx(), {in.n()}), dbeta = poisoned(ctx(), {in.n()});
  auto scratch = poisoned(ctx(), {ops::layerNormBackwardScratch(in.rows(), in.n())});
  vk::Recorder brec(ctx());
  ops::layerNormBackward(brec, at(x, shape), gamma.view(), at(mean, {in.rows()}), rstd.view(),
                         at(dy, shape), at(dx, shape), dgamma.view(), dbeta.view(), scratch.view());
  brec.submit();
  const auto dx_all = download(ctx(), dx);
  EXPECT_TRUE(
      closeOnScale(unpadded(dx_all, 1), grads.dx, DType::BF16, dxTerm(b), kBackwardTolerance))
      << "dx";
  EXPECT_TRUE(padsUntouched(dx_all, 1));
  EXPECT_TRUE(closeOnScale(download(ctx(), dgamma), grads.dgamma, DType::F32, maxAbs(b.dy),
                           kBackwardTolerance))
      << "dgamma";
  EXPECT_TRUE(closeOnScale(download(ctx(), dbeta), grads.dbeta, DType::F32, maxAbs(b.dy),
                           kBackwardTolerance))
      << "dbeta";

  vk::Recorder irec(ctx());  // y over x
  ops::layerNorm(irec, at(x, shape), gamma.view(), beta.view(), at(x, shape), at(mean, {in.rows()}),
                 rstd.view(), kEps);
  irec.submit();
  EXPECT_TRUE(closeInFormat(unpadded(download(ctx(), x), 1), want.y, DType::BF16, kTolerance));
  vk::Recorder bad(ctx());
  try {
    ops::layerNorm(bad, at(x, shape), gamma.view(), beta.view(),
                   ops::view(x.buffer, shape, 2, DType::F16), at(mean, {in.rows()}), rstd.view(),
                   kEps);
    ADD_FAILURE() << "no ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("layerNorm: x (5,33): y in place of x needs x's dtype"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(bad.dispatchCount(), 0u);
}

TEST_F(LayerNormBackward, RejectsBadShapesBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 7}, rng.uniform(28));
  auto v7 = upload(ctx(), {7}, rng.uniform(7)), v8 = upload(ctx(), {8}, rng.uniform(8));
  auto dy = upload(ctx(), {4, 7}, rng.uniform(28)), dx = poisoned(ctx(), {4, 7});
  auto m4 = upload(ctx(), {4}, rng.uniform(4)), m5 = poisoned(ctx(), {5});
  auto dg = poisoned(ctx(), {7}), db = poisoned(ctx(), {7});
  auto scratch = poisoned(ctx(), {ops::layerNormBackwardScratch(4, 7)});
  auto addend = upload(ctx(), {4, 7}, rng.uniform(28));
  struct Args {
    ops::TensorView x, gamma, mean, rstd, dy, dx, dgamma, dbeta, scratch, addend;
  };
  const Args good{x.view(),  v7.view(), m4.view(), m4.view(),      dy.view(),
                  dx.view(), dg.view(), db.view(), scratch.view(), addend.view()};
  auto expectError = [&](const std::function<void(Args&)>& spoil, const std::string& expected) {
    SCOPED_TRACE(expected);
    Args a = good;
    spoil(a);
    vk::Recorder rec(ctx());
    try {
      ops::layerNormBackward(rec, a.x, a.gamma, a.mean, a.rstd, a.dy, a.dx, a.dgamma, a.dbeta,
                             a.scratch, ops::Write::Overwrite, ops::Write::Overwrite,
                             ops::LayerNormVariant::Auto, ops::LayerNormParamsVariant::Auto,
                             &a.addend);
      ADD_FAILURE() << "no ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  };
  const std::string op = "layerNormBackward: x (4,7)";
  expectError([&](Args& a) { a.gamma = v8.view(); }, op + " needs gamma (7), got (8)");
  expectError([&](Args& a) { a.mean = m5.view(); }, op + " needs mean (4), got (5)");
  expectError(
      [&](Args& a) {
        a.rstd = ops::view(m4.buffer, {4, 1});
      },
      op + " needs rstd (4), got (4,1)");
  expectError(
      [&](Args& a) {
        a.dy = ops::view(dy.buffer, {7, 4});
      },
      op + " needs dy shaped like x, got (7,4)");
  expectError(
      [&](Args& a) {
        a.dx = ops::view(dx.buffer, {2, 14});
      },
      op + " needs dx shaped like x, got (2,14)");
  expectError([&](Args& a) { a.dgamma = v8.view(); }, op + " needs dgamma (7), got (8)");
  expectError(
      [&](Args& a) {
        a.dbeta = ops::view(db.buffer, {1, 7});
      },
      op + " needs dbeta (7), got (1,7)");
  expectError([&](Args& a) { a.scratch = ops::view(scratch.buffer, {3}); },
              op + " needs scratch of " + std::to_string(ops::layerNormBackwardScratch(4, 7)));
  expectError(
      [&](Args& a) {
        a.x = ops::view(x.buffer, {4, 0});
      },
      "layerNormBackward: x (4,0) is empty");
  expectError([&](Args& a) { a.dx = a.dy; }, "layerNormBackward: dx (4,7) overlaps dy (4,7)");
  expectError([&](Args& a) { a.dbeta = a.dgamma; },
              "layerNormBackward: dbeta (7) overlaps dgamma (7)");
  expectError([&](Args& a) { a.scratch = ops::view(dx.buffer, {14}); },
              "layerNormBackward: scratch (14) overlaps dx (4,7)");
  expectError([&](Args& a) { a.addend = v7.view(); },
              op + " needs dx_addend shaped like x, got (7)");
  expectError([&](Args& a) { a.addend = a.dx; },
              "layerNormBackward: dx (4,7) overlaps dx_addend (4,7)");
}

}  // namespace
}  // namespace vkgrad::test
