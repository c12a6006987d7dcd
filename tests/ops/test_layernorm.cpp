#include "ops/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/reference/layernorm.h"
#include "vk/error.h"

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

Outputs runLayernorm(vk::Context& context, const Inputs& in, ops::LayernormVariant variant) {
  auto x = upload(context, in.shape, in.x);
  auto gamma = upload(context, {in.n()}, in.gamma), beta = upload(context, {in.n()}, in.beta);
  auto y = poisoned(context, in.shape);
  auto mean = poisoned(context, {in.rows()}), rstd = poisoned(context, {in.rows()});
  vk::Recorder rec(context);
  ops::layernorm(rec, x.view(), gamma.view(), beta.view(), y.view(), mean.view(), rstd.view(), kEps,
                 variant);
  EXPECT_EQ(rec.dispatchCount(), 1u);
  rec.submit();
  return {download(context, y), download(context, mean), download(context, rstd)};
}

Outputs reference(const Inputs& in) {
  Outputs out{std::vector<float>(in.x.size()), std::vector<float>(in.rows()),
              std::vector<float>(in.rows())};
  ops::ref::layernorm(in.x.data(), in.gamma.data(), in.beta.data(), out.y.data(), out.mean.data(),
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

class LayernormTest : public VkTest, public ::testing::WithParamInterface<ops::LayernormVariant> {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    const ops::LayernormVariant v = GetParam();
    if ((v == ops::LayernormVariant::SubgroupStorage ||
         v == ops::LayernormVariant::SubgroupTexel) &&
        !ctx().info().isCpu())
      GTEST_SKIP() << "subgroup-per-row variants are only promised on CPU devices";
  }
  Outputs run(const Inputs& in) { return runLayernorm(ctx(), in, GetParam()); }
};

TEST_P(LayernormTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Short rows take the invocation-per-row path, long ones a workgroup (or subgroup) per
  // row; the switch is at N = 32 on GPUs and 64 on CPU devices. N = 1 has zero variance:
  // y = beta, rstd = 1/sqrt(eps).
  const ops::Shape shapes[] = {{1, 1},     {3, 7},  {33, 257}, {5, 1000}, {2, 100003}, {1000, 7},
                               {2, 3, 17}, {4, 32}, {4, 33},   {4, 64},   {4, 65},     {7}};
  for (const ops::Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, 0.3f, 1.5f);
    expectMatchesReference(in, run(in));
  }
}

TEST_P(LayernormTest, HandlesManyShortRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // More rows than a grid of 65535 invocations: the row loop must stride.
  const Inputs in = randomInputs(rng, {100000, 7}, 0.0f, 1.0f);
  expectMatchesReference(in, run(in));
}

TEST_P(LayernormTest, VarianceIsStableUnderLargeOffset) {
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

TEST_P(LayernormTest, GivesTheSameBitsTwice) {
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

TEST_P(LayernormTest, RunsInPlaceAndTakesLeadingDimsForStats) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{2, 3, 5}, ops::Shape{2, 3, 300}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, -0.2f, 2.0f);
    auto x = upload(ctx(), shape, in.x);
    auto gamma = upload(ctx(), {in.n()}, in.gamma), beta = upload(ctx(), {in.n()}, in.beta);
    auto mean = poisoned(ctx(), {shape[0], shape[1]}), rstd = poisoned(ctx(), {shape[0], shape[1]});
    vk::Recorder rec(ctx());
    ops::layernorm(rec, x.view(), gamma.view(), beta.view(), x.view(), mean.view(), rstd.view(),
                   kEps, GetParam());
    rec.submit();
    expectMatchesReference(in, {download(ctx(), x), download(ctx(), mean), download(ctx(), rstd)});
  }
}

TEST_P(LayernormTest, ReadsViewsAtOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Every tensor is the middle of a larger buffer, at an offset the device allows for
  // storage buffers; the elements around the outputs must stay untouched.
  const int64_t pad = int64_t(ctx().info().min_storage_offset_alignment) / 4 * 3;
  for (const ops::Shape& shape : {ops::Shape{5, 9}, ops::Shape{5, 300}}) {
    SCOPED_TRACE(shape.str());
    const Inputs in = randomInputs(rng, shape, 0.1f, 1.0f);
    auto padded = [&](const std::vector<float>& v) {
      std::vector<float> out(v.size() + 2 * pad, 7.0f);
      std::copy(v.begin(), v.end(), out.begin() + pad);
      return upload(ctx(), {int64_t(out.size())}, out);
    };
    auto x = padded(in.x), gamma = padded(in.gamma), beta = padded(in.beta);
    auto y = poisoned(ctx(), {shape.numel() + 2 * pad});
    auto mean = poisoned(ctx(), {shape.rows() + 2 * pad}),
         rstd = poisoned(ctx(), {shape.rows() + 2 * pad});
    const uint64_t off = pad * 4;
    vk::Recorder rec(ctx());
    ops::layernorm(rec, ops::view(x.buffer, shape, off), ops::view(gamma.buffer, {in.n()}, off),
                   ops::view(beta.buffer, {in.n()}, off), ops::view(y.buffer, shape, off),
                   ops::view(mean.buffer, {in.rows()}, off),
                   ops::view(rstd.buffer, {in.rows()}, off), kEps, GetParam());
    rec.submit();
    Outputs got;
    for (auto [out, dev] : {std::pair{&got.y, &y}, {&got.mean, &mean}, {&got.rstd, &rstd}}) {
      const auto all = download(ctx(), *dev);
      for (int64_t i = 0; i < pad; ++i)
        EXPECT_TRUE(std::isnan(all[i]) && std::isnan(all[all.size() - 1 - i]))
            << "wrote outside at " << i;
      out->assign(all.begin() + pad, all.end() - pad);
    }
    expectMatchesReference(in, got);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, LayernormTest,
                         ::testing::Values(ops::LayernormVariant::Auto,
                                           ops::LayernormVariant::WorkgroupStorage,
                                           ops::LayernormVariant::WorkgroupTexel,
                                           ops::LayernormVariant::SubgroupStorage,
                                           ops::LayernormVariant::SubgroupTexel),
                         [](const auto& info) { return ops::layernormVariantName(info.param); });

TEST_F(VkTest, LayernormRejectsBadShapesBeforeRecording) {
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
      ops::layernorm(rec, xv, gamma, beta, yv, mean, rstd, eps);
      ADD_FAILURE() << "no ShapeError";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  };
  const auto xv = x.view(), gv = g7.view(), yv = y.view(), mv = m4.view();
  expectError(xv, g8.view(), gv, yv, mv, mv, kEps, "layernorm: x (4,7) needs gamma (7), got (8)");
  expectError(xv, gv, g8.view(), yv, mv, mv, kEps, "layernorm: x (4,7) needs beta (7), got (8)");
  expectError(xv, gv, gv, y8.view(), mv, mv, kEps,
              "layernorm: x (4,7) needs y shaped like x, got (4,8)");
  expectError(xv, gv, gv, yv, m5.view(), mv, kEps, "layernorm: x (4,7) needs mean (4), got (5)");
  expectError(xv, gv, gv, yv, mv, ops::view(m4.buffer, {4, 1}), kEps,
              "layernorm: x (4,7) needs rstd (4), got (4,1)");
  expectError(xv, gv, gv, yv, mv, mv, -1.0f, "layernorm: x (4,7): eps must be finite and >= 0");
  expectError(ops::view(x.buffer, {4, 0}), ops::view(g7.buffer, {0}), ops::view(g7.buffer, {0}), yv,
              mv, mv, kEps, "layernorm: x (4,0) is empty");
  // Right shape, but the buffer behind rstd holds only 3 floats.
  expectError(xv, gv, gv, yv, mv, ops::view(m3.buffer, {4}), kEps,
              "layernorm: rstd (4) at offset 0 needs 16 bytes");
}

}  // namespace
}  // namespace vkgrad::test
