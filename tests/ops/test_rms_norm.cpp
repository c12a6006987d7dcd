// ops::rmsNorm and rmsNormBackward against the double-precision CPU reference on odd shapes,
// in f32 and with 16-bit activations; write modes; shape errors.
#include "vkgrad/ops/rms_norm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/rms_norm.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;

constexpr float kEps = 1e-6f;
// y and rstd carry the rounding of the compensated sum of squares and of 1/sqrt: a few ulp
// of the largest output. dx subtracts xhat * mean(g * xhat) from g: a few ulp of its terms
// (dxClose). Seen on lavapipe: below 5e-7 for each.
constexpr double kTolerance = 2e-6;
constexpr double kGradTolerance = 1e-5;

struct Case {
  Shape shape;
  std::vector<float> x, gamma, dy;
  int64_t rows() const { return shape.rows(); }
  int64_t n() const { return shape.back(); }
};

Case randomCase(Rng& rng, Shape shape) {
  return {shape, rng.normal(size_t(shape.numel()), 0.2f, 1.3f),
          rng.uniform(size_t(shape.back()), 0.5f, 1.5f), rng.normal(size_t(shape.numel()))};
}

struct Result {
  std::vector<float> y, rstd, dx, dgamma;
};

// Forward, then backward from dy, each tensor stored in its dtype (gamma and the scratch f32).
Result run(vk::Context& ctx, const Case& c, DType act = DType::F32) {
  auto x = upload(ctx, c.shape, c.x, act), gamma = upload(ctx, {c.n()}, c.gamma);
  auto dy = upload(ctx, c.shape, c.dy, act);
  auto y = poisoned(ctx, c.shape, act), rstd = poisoned(ctx, {c.rows()});
  auto dx = poisoned(ctx, c.shape, act), dgamma = poisoned(ctx, {c.n()});
  auto scratch = poisoned(ctx, {ops::rmsNormBackwardScratch(c.rows(), c.n())});
  vk::Recorder rec(ctx);
  ops::rmsNorm(rec, x.view(), gamma.view(), y.view(), rstd.view(), kEps);
  ops::rmsNormBackward(rec, x.view(), gamma.view(), rstd.view(), dy.view(), dx.view(),
                       dgamma.view(), scratch.view(), ops::Write::Overwrite, ops::Write::Overwrite);
  rec.submit();
  return {download(ctx, y), download(ctx, rstd), download(ctx, dx), download(ctx, dgamma)};
}

Result reference(const Case& c) {
  Result r{std::vector<float>(c.x.size()), std::vector<float>(size_t(c.rows())),
           std::vector<float>(c.x.size()), std::vector<float>(size_t(c.n()))};
  ops::ref::rmsNorm(c.x.data(), c.gamma.data(), r.y.data(), r.rstd.data(), c.rows(), c.n(), kEps);
  ops::ref::rmsNormBackward(c.x.data(), c.gamma.data(), c.dy.data(), r.dx.data(), r.dgamma.data(),
                            c.rows(), c.n(), kEps);
  return r;
}

// dx is a difference of terms of size rstd * |dy * gamma|, which may cancel almost wholly (a
// row of one element: dx = rstd * g * eps / (x^2 + eps)), so it is compared on the scale of
// those terms: the largest is appended to both sides, pinning allClose's normalisation.
::testing::AssertionResult dxClose(std::vector<float> got, std::vector<float> want, const Case& c,
                                   const std::vector<float>& rstd, double tolerance) {
  float term = 0.0f;
  for (int64_t i = 0; i < c.shape.numel(); ++i)
    term = std::max(
        term, std::fabs(rstd[size_t(i / c.n())] * c.dy[size_t(i)] * c.gamma[size_t(i % c.n())]));
  got.push_back(term);
  want.push_back(term);
  return allClose(got, want, tolerance);
}

class RmsNormTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(RmsNormTest, MatchesCpuOnOddShapes) {
  SCOPED_TRACE(rng_.describe());
  // Rows of up to 64 (32 on GPUs) take an invocation each, longer ones a workgroup; more than
  // 64 rows sum dgamma in blocks and then over blocks.
  for (const Shape& shape : {Shape{1, 1}, Shape{3, 7}, Shape{5, 65}, Shape{2, 3, 129},
                             Shape{131, 9}, Shape{67, 300}, Shape{7}}) {
    SCOPED_TRACE(shape.str());
    const Case c = randomCase(rng_, shape);
    const Result got = run(ctx(), c), want = reference(c);
    EXPECT_TRUE(allClose(got.y, want.y, kTolerance)) << "y";
    EXPECT_TRUE(allClose(got.rstd, want.rstd, kTolerance)) << "rstd";
    EXPECT_TRUE(dxClose(got.dx, want.dx, c, want.rstd, kGradTolerance)) << "dx";
    EXPECT_TRUE(allClose(got.dgamma, want.dgamma, kGradTolerance)) << "dgamma";
  }
}

TEST_F(RmsNormTest, SixteenBitActivations) {
  SCOPED_TRACE(rng_.describe());
  for (DType act : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(ops::dtypeName(act));
    Case c = randomCase(rng_, {9, 70});
    c.x = ops::ref::roundTo(act, c.x);  // the values the tensors hold
    c.dy = ops::ref::roundTo(act, c.dy);
    const Result got = run(ctx(), c, act), want = reference(c);
    EXPECT_TRUE(closeInFormat(got.y, want.y, act, kTolerance)) << "y";
    EXPECT_TRUE(allClose(got.rstd, want.rstd, kTolerance)) << "rstd (f32)";
    EXPECT_TRUE(closeInFormat(got.dx, want.dx, act, kGradTolerance)) << "dx";
    EXPECT_TRUE(allClose(got.dgamma, want.dgamma, kGradTolerance)) << "dgamma (f32)";
  }
}

TEST_F(RmsNormTest, AccumulatesAndSkipsOutputs) {
  SCOPED_TRACE(rng_.describe());
  for (const Shape& shape : {Shape{5, 11}, Shape{131, 9}}) {  // dgamma in one block, and three
    SCOPED_TRACE(shape.str());
    const Case c = randomCase(rng_, shape);
    const Result want = reference(c);
    const std::vector<float> dx0 = rng_.uniform(c.x.size()), dg0 = rng_.uniform(size_t(c.n()));
    auto x = upload(ctx(), c.shape, c.x), gamma = upload(ctx(), {c.n()}, c.gamma);
    auto dy = upload(ctx(), c.shape, c.dy), rstd = upload(ctx(), {c.rows()}, want.rstd);
    auto dx = upload(ctx(), c.shape, dx0), dgamma = upload(ctx(), {c.n()}, dg0);
    auto scratch = poisoned(ctx(), {ops::rmsNormBackwardScratch(c.rows(), c.n())});
    vk::Recorder rec(ctx());
    // dgamma alone, added; then dx alone, added.
    ops::rmsNormBackward(rec, x.view(), gamma.view(), rstd.view(), dy.view(), {}, dgamma.view(),
                         scratch.view(), ops::Write::Overwrite, ops::Write::Accumulate);
    ops::rmsNormBackward(rec, x.view(), gamma.view(), rstd.view(), dy.view(), dx.view(), {}, {},
                         ops::Write::Accumulate, ops::Write::Overwrite);
    rec.submit();
    std::vector<float> want_dx(dx0), want_dg(dg0);
    for (size_t i = 0; i < want_dx.size(); ++i) want_dx[i] += want.dx[i];
    for (size_t i = 0; i < want_dg.size(); ++i) want_dg[i] += want.dgamma[i];
    EXPECT_TRUE(allClose(download(ctx(), dx), want_dx, kGradTolerance)) << "dx";
    EXPECT_TRUE(allClose(download(ctx(), dgamma), want_dg, kGradTolerance)) << "dgamma";
  }
}

TEST_F(RmsNormTest, RefusesBadShapesBeforeRecording) {
  auto x = poisoned(ctx(), {4, 7}), gamma = poisoned(ctx(), {8}), y = poisoned(ctx(), {4, 7});
  auto rstd = poisoned(ctx(), {4}), good_gamma = poisoned(ctx(), {7});
  vk::Recorder rec(ctx());
  EXPECT_THROW(ops::rmsNorm(rec, x.view(), gamma.view(), y.view(), rstd.view()), ShapeError);
  EXPECT_THROW(ops::rmsNorm(rec, x.view(), good_gamma.view(), y.view(), rstd.view(), -1.0f),
               ShapeError);
  EXPECT_THROW(ops::rmsNorm(rec, x.view(), good_gamma.view(), y.view(), gamma.view()), ShapeError);
  // 131 rows: dgamma needs a scratch of 3 blocks.
  auto big = poisoned(ctx(), {131, 7}), big_rstd = poisoned(ctx(), {131});
  auto dgamma = poisoned(ctx(), {7}), small = poisoned(ctx(), {7});
  EXPECT_THROW(ops::rmsNormBackward(rec, big.view(), good_gamma.view(), big_rstd.view(), big.view(),
                                    {}, dgamma.view(), small.view(), ops::Write::Overwrite,
                                    ops::Write::Overwrite),
               ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
