#include "vkgrad/ops/batch_norm.h"

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/reference/batch_norm.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;
using ops::Write;

constexpr float kEps = 1e-5f;
constexpr float kMomentum = 0.1f;
// y is O(3 gamma) and carries the rounding of the channel sums (per-invocation strided sums
// then a tree, up to ~700 terms here), of x - mean and of 1/sqrt: a few ulp of the largest
// output. The gradients sum up to ~700 products per channel the same way.
constexpr double kTolerance = 5e-6;
// dgamma and dbeta are channel sums of up to 715 products of O(1) that cancel: the sum can be
// ~100x smaller than the sum of its terms' magnitudes, while the f32 sum's error scales with
// the latter (a seed failed 5e-6 at 5.7e-6, its error 2.4e-8 of the terms' magnitudes:
// rounding, not a wrong sum). So they are held to 4x the elementwise tolerance.
constexpr double kSumTolerance = 2e-5;

// Odd sizes: images with more values per channel than a workgroup has invocations (strided
// loops), an MLP's (N,C), one pixel per channel, and a rank-3 (N,C,L).
const Shape kShapes[] = {{5, 3, 11, 13}, {13, 6}, {3, 7, 1, 1}, {2, 5, 9}, {2, 1, 3, 3}};

struct Case {
  Shape shape;
  std::vector<float> x, gamma, beta, running_mean, running_var;
  int64_t n() const { return shape[0]; }
  int64_t c() const { return shape[1]; }
  int64_t s() const { return shape.numel() / (n() * c()); }
};

Case randomCase(Rng& rng, const Shape& shape, float offset = 0.3f, float stddev = 1.5f) {
  const size_t c = size_t(shape[1]);
  return {shape,
          rng.normal(size_t(shape.numel()), offset, stddev),
          rng.uniform(c, 0.5f, 1.5f),
          rng.uniform(c, -0.5f, 0.5f),
          rng.normal(c),
          rng.uniform(c, 0.5f, 1.5f)};
}

struct Forward {
  std::vector<float> y, mean, rstd, running_mean, running_var;
};

// The training forward on the device (views one element into their buffers), running
// statistics updated in place.
Forward runTraining(vk::Context& context, const Case& k, DType dtype = DType::F32,
                    ops::BatchNormVariant variant = ops::BatchNormVariant::Auto) {
  const Shape stats{k.c()};
  auto x = shiftedUpload(context, k.shape, k.x, dtype);
  auto gamma = shiftedUpload(context, stats, k.gamma, DType::F32);
  auto beta = shiftedUpload(context, stats, k.beta, DType::F32);
  auto y = shiftedPoisoned(context, k.shape, dtype);
  auto mean = shiftedPoisoned(context, stats, DType::F32);
  auto rstd = shiftedPoisoned(context, stats, DType::F32);
  auto rm = shiftedUpload(context, stats, k.running_mean, DType::F32);
  auto rv = shiftedUpload(context, stats, k.running_var, DType::F32);
  const ops::BatchNormRunning running{rm.view, rv.view, kMomentum};
  vk::Recorder rec(context);
  ops::batchNorm(rec, x.view, gamma.view, beta.view, y.view, mean.view, rstd.view, kEps, &running,
                 variant);
  // Within 4 storage buffers the running update is a dispatch of its own (ops/batch_norm.cpp).
  EXPECT_EQ(rec.dispatchCount(), ops::fewerStorageBuffers(context, 8) ? 2u : 1u);
  rec.submit();
  return {downloadShifted(context, y), downloadShifted(context, mean),
          downloadShifted(context, rstd), downloadShifted(context, rm),
          downloadShifted(context, rv)};
}

Forward referenceTraining(const Case& k) {
  Forward f{std::vector<float>(k.x.size()), std::vector<float>(size_t(k.c())),
            std::vector<float>(size_t(k.c())), k.running_mean, k.running_var};
  ops::ref::batchNorm(k.x.data(), k.gamma.data(), k.beta.data(), f.y.data(), f.mean.data(),
                      f.rstd.data(), f.running_mean.data(), f.running_var.data(), k.n(), k.c(),
                      k.s(), kEps, kMomentum);
  return f;
}

double meanAbs(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) sum += std::fabs(x);
  return sum / double(v.size());
}

class BatchNormTest : public VkTest {
 protected:
  Rng rng_;
};

// Both layouts: the shared-memory reductions with barriers and one subgroup per channel
// (lavapipe runs a workgroup of its subgroup size as one subgroup).
constexpr ops::BatchNormVariant kVariants[] = {ops::BatchNormVariant::Workgroup,
                                               ops::BatchNormVariant::Subgroup};

TEST_F(BatchNormTest, TrainingMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  for (const Shape& shape : kShapes)
    for (ops::BatchNormVariant variant : kVariants) {
      SCOPED_TRACE(shape.str() + (variant == ops::BatchNormVariant::Subgroup ? " subgroup" : ""));
      const Case k = randomCase(rng_, shape);
      const Forward got = runTraining(ctx(), k, DType::F32, variant), want = referenceTraining(k);
      EXPECT_TRUE(allClose(got.y, want.y, kTolerance)) << "y";
      // A channel's mean is a sum of terms of O(1) that can cancel to far less (a seed's
      // 18-value channel: mean 0.0058, f32 error 3.3e-8, 2.5e-8 of the values' scale): held
      // on the values' scale, the mean |x|.
      const double scale = meanAbs(k.x);
      EXPECT_TRUE(allCloseOnScale(got.mean, want.mean, scale, kTolerance)) << "mean";
      EXPECT_TRUE(allClose(got.rstd, want.rstd, kTolerance)) << "rstd";
      EXPECT_TRUE(allCloseOnScale(got.running_mean, want.running_mean, scale, kTolerance))
          << "running_mean";
      EXPECT_TRUE(allClose(got.running_var, want.running_var, kTolerance)) << "running_var";
    }
}

// Channels of 200,001 values: on a subgroup of 8 lanes the three passes looped 75,000 times,
// past the 65535 at which llvmpipe silently ends an invocation, and the end of y kept the
// poison; Auto takes a wider workgroup there. Sums of 200,001 terms: kSumTolerance.
TEST_F(BatchNormTest, LongChannelsStayWithinACpuLanesLoopBudget) {
  SCOPED_TRACE(rng_.describe());
  const Case k = randomCase(rng_, {1, 2, 200001});
  const Forward got = runTraining(ctx(), k), want = referenceTraining(k);
  EXPECT_TRUE(allClose(got.y, want.y, kSumTolerance)) << "y";
  EXPECT_TRUE(allClose(got.rstd, want.rstd, kSumTolerance)) << "rstd";
}

// A large common offset (x = 1000 + N(0, 0.01)): the two passes over x - shift keep y's
// precision where E[x^2] - E[x]^2 would lose every digit.
TEST_F(BatchNormTest, OffsetDataKeepsItsPrecision) {
  SCOPED_TRACE(rng_.describe());
  const Case k = randomCase(rng_, {6, 4, 5, 7}, 1000.0f, 0.01f);
  const Forward got = runTraining(ctx(), k), want = referenceTraining(k);
  // x - shift is exact and delta is a mean of small values: y keeps f32 precision relative
  // to the std. With the f32 mean (ulp(1000) / 2 = 3e-5, 3e-3 of the std) it would not.
  EXPECT_TRUE(allClose(got.y, want.y, 2e-5)) << "y";
}

TEST_F(BatchNormTest, InferenceUsesTheRunningStatistics) {
  SCOPED_TRACE(rng_.describe());
  for (const Shape& shape : {kShapes[0], kShapes[1], Shape{1, 4, 1, 1}}) {
    SCOPED_TRACE(shape.str());
    const Case k = randomCase(rng_, shape);
    const Shape stats{k.c()};
    auto x = upload(ctx(), shape, k.x), gamma = upload(ctx(), stats, k.gamma),
         beta = upload(ctx(), stats, k.beta), rm = upload(ctx(), stats, k.running_mean),
         rv = upload(ctx(), stats, k.running_var), y = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::batchNormInference(rec, x.view(), gamma.view(), beta.view(), rm.view(), rv.view(),
                            y.view(), kEps);
    rec.submit();
    std::vector<float> want(k.x.size());
    ops::ref::batchNormInference(k.x.data(), k.gamma.data(), k.beta.data(), k.running_mean.data(),
                                 k.running_var.data(), want.data(), k.n(), k.c(), k.s(), kEps);
    EXPECT_TRUE(allClose(download(ctx(), y), want, kTolerance));
    EXPECT_TRUE(allClose(download(ctx(), rm), k.running_mean, 0.0)) << "running_mean untouched";
  }
}

struct Grads {
  std::vector<float> dx, dgamma, dbeta;
};

// The backward on the device from the given statistics; each gradient starts at `init`
// (accumulate) or poisoned (overwrite).
Grads runBackward(vk::Context& context, const Case& k, const std::vector<float>& stat0,
                  const std::vector<float>& stat1, const std::vector<float>& dy, bool training,
                  Write write, const Grads& init,
                  ops::BatchNormVariant variant = ops::BatchNormVariant::Auto) {
  const Shape stats{k.c()};
  const bool acc = write == Write::Accumulate;
  auto x = upload(context, k.shape, k.x), gamma = upload(context, stats, k.gamma),
       s0 = upload(context, stats, stat0), s1 = upload(context, stats, stat1),
       tdy = upload(context, k.shape, dy);
  auto dx = acc ? upload(context, k.shape, init.dx) : poisoned(context, k.shape);
  auto dgamma = acc ? upload(context, stats, init.dgamma) : poisoned(context, stats);
  auto dbeta = acc ? upload(context, stats, init.dbeta) : poisoned(context, stats);
  vk::Recorder rec(context);
  ops::batchNormBackward(rec, x.view(), gamma.view(), s0.view(), s1.view(), tdy.view(),
                         {dx.view(), dgamma.view(), dbeta.view(), write, write, write}, training,
                         kEps, variant);
  // Within 4 storage buffers dx is a dispatch, dgamma and dbeta another (ops/batch_norm.cpp).
  EXPECT_EQ(rec.dispatchCount(), ops::fewerStorageBuffers(context, 8) ? 2u : 1u);
  rec.submit();
  return {download(context, dx), download(context, dgamma), download(context, dbeta)};
}

TEST_F(BatchNormTest, BackwardMatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  int round = 0;
  for (const Shape& shape : kShapes)
    for (bool training : {true, false})
      for (Write write : {Write::Overwrite, Write::Accumulate}) {
        const ops::BatchNormVariant variant = kVariants[(round++ % 3) % 2];  // both, every mode
        SCOPED_TRACE(shape.str() + (training ? " training" : " inference") +
                     (write == Write::Accumulate ? " accumulate" : "") +
                     (variant == ops::BatchNormVariant::Subgroup ? " subgroup" : ""));
        const Case k = randomCase(rng_, shape);
        const auto dy = rng_.normal(k.x.size());
        std::vector<float> stat0 = k.running_mean, stat1 = k.running_var;
        if (training) {
          const Forward f = runTraining(ctx(), k);
          stat0 = f.mean, stat1 = f.rstd;
        }
        const Grads init{rng_.normal(k.x.size()), rng_.normal(size_t(k.c())),
                         rng_.normal(size_t(k.c()))};
        const Grads got = runBackward(ctx(), k, stat0, stat1, dy, training, write, init, variant);
        Grads want{std::vector<float>(k.x.size()), std::vector<float>(size_t(k.c())),
                   std::vector<float>(size_t(k.c()))};
        ops::ref::batchNormBackward(k.x.data(), k.gamma.data(), stat0.data(), stat1.data(),
                                    dy.data(), want.dx.data(), want.dgamma.data(),
                                    want.dbeta.data(), k.n(), k.c(), k.s(), training, kEps);
        if (write == Write::Accumulate)
          for (auto [w, i] : {std::pair{&want.dx, &init.dx}, std::pair{&want.dgamma, &init.dgamma},
                              std::pair{&want.dbeta, &init.dbeta}})
            for (size_t e = 0; e < w->size(); ++e) (*w)[e] += (*i)[e];
        EXPECT_TRUE(allClose(got.dx, want.dx, kTolerance)) << "dx";
        // dgamma and dbeta are sums over a channel that may cancel (one channel of 18 products
        // once summed to 0.0075): their error is measured against the summands' magnitude,
        // not against the sum itself.
        // Per channel: the sum of |dy| and of |dy * xhat| over its elements.
        std::vector<double> dy_mass(size_t(k.c())), product_mass(size_t(k.c()));
        for (int64_t i = 0; i < int64_t(k.x.size()); ++i) {
          const size_t c = size_t((i / k.s()) % k.c());
          const double rstd = training ? stat1[c] : 1.0 / std::sqrt(stat1[c] + kEps);
          dy_mass[c] += std::abs(dy[size_t(i)]);
          product_mass[c] += std::abs(dy[size_t(i)] * (double(k.x[size_t(i)]) - stat0[c]) * rstd);
        }
        for (size_t c = 0; c < size_t(k.c()); ++c) {
          EXPECT_NEAR(got.dgamma[c], want.dgamma[c],
                      kSumTolerance * (product_mass[c] + std::abs(init.dgamma[c])))
              << "dgamma channel " << c;
          EXPECT_NEAR(got.dbeta[c], want.dbeta[c],
                      kSumTolerance * (dy_mass[c] + std::abs(init.dbeta[c])))
              << "dbeta channel " << c;
        }
      }
}

// Only some gradients asked for: the others are not written (their stand-in bindings are
// never touched) and the ones asked for are the same bits as in a full run.
TEST_F(BatchNormTest, BackwardWritesOnlyTheGradientsAskedFor) {
  SCOPED_TRACE(rng_.describe());
  const Case k = randomCase(rng_, {3, 4, 5, 5});
  const Shape stats{k.c()};
  const Forward f = runTraining(ctx(), k);
  const auto dy = rng_.normal(k.x.size());
  const Grads full = runBackward(ctx(), k, f.mean, f.rstd, dy, true, Write::Overwrite, {});
  auto x = upload(ctx(), k.shape, k.x), gamma = upload(ctx(), stats, k.gamma),
       mean = upload(ctx(), stats, f.mean), rstd = upload(ctx(), stats, f.rstd),
       tdy = upload(ctx(), k.shape, dy);
  auto dx = poisoned(ctx(), k.shape), dbeta = poisoned(ctx(), stats);
  vk::Recorder rec(ctx());
  ops::batchNormBackward(rec, x.view(), gamma.view(), mean.view(), rstd.view(), tdy.view(),
                         {{}, {}, dbeta.view()});
  ops::batchNormBackward(rec, x.view(), gamma.view(), mean.view(), rstd.view(), tdy.view(),
                         {dx.view(), {}, {}});
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), dbeta), full.dbeta, 0.0));
  EXPECT_TRUE(allClose(download(ctx(), dx), full.dx, 0.0));
}

// loss = sum w * y with the device's training forward (batch statistics: the gradient flows
// through the mean and variance too); the analytic gradients are the device backward's with
// dy = w.
TEST_F(BatchNormTest, PassesGradCheck) {
  SCOPED_TRACE(rng_.describe());
  for (const Shape& shape : {Shape{3, 4, 3, 2}, Shape{7, 3}}) {
    SCOPED_TRACE(shape.str());
    Case k = randomCase(rng_, shape);
    const std::vector<float> w = rng_.uniform(size_t(shape.numel()));
    auto loss = [&] { return weightedSum(runTraining(ctx(), k).y, w); };
    const Forward f = runTraining(ctx(), k);
    const Grads g = runBackward(ctx(), k, f.mean, f.rstd, w, true, Write::Overwrite, {});
    EXPECT_TRUE(checkGradients(
        loss, {{"x", &k.x, g.dx}, {"gamma", &k.gamma, g.dgamma}, {"beta", &k.beta, g.dbeta}},
        rng_));
  }
}

// x and y (and dy, dx) in f16 or bf16: the statistics and arithmetic stay f32, each store
// rounds once, so closeInFormat against the reference on the rounded inputs.
TEST_F(BatchNormTest, SixteenBitActivationsMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  for (DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    Case k = randomCase(rng_, {4, 3, 5, 7});
    k.x = ops::ref::roundTo(dtype, k.x);
    const Forward got = runTraining(ctx(), k, dtype), want = referenceTraining(k);
    EXPECT_TRUE(closeInFormat(got.y, want.y, dtype, kTolerance)) << "y";
    EXPECT_TRUE(allClose(got.mean, want.mean, kTolerance)) << "mean";
    EXPECT_TRUE(allClose(got.running_var, want.running_var, kTolerance)) << "running_var";

    const Shape stats{k.c()};
    const auto dy = ops::ref::roundTo(dtype, rng_.normal(k.x.size()));
    auto x = shiftedUpload(ctx(), k.shape, k.x, dtype),
         tdy = shiftedUpload(ctx(), k.shape, dy, dtype);
    auto gamma = upload(ctx(), stats, k.gamma), mean = upload(ctx(), stats, got.mean),
         rstd = upload(ctx(), stats, got.rstd), dgamma = poisoned(ctx(), stats),
         dbeta = poisoned(ctx(), stats);
    auto dx = shiftedPoisoned(ctx(), k.shape, dtype);
    vk::Recorder rec(ctx());
    ops::batchNormBackward(rec, x.view, gamma.view(), mean.view(), rstd.view(), tdy.view,
                           {dx.view, dgamma.view(), dbeta.view()});
    rec.submit();
    Grads w{std::vector<float>(k.x.size()), std::vector<float>(size_t(k.c())),
            std::vector<float>(size_t(k.c()))};
    ops::ref::batchNormBackward(k.x.data(), k.gamma.data(), got.mean.data(), got.rstd.data(),
                                dy.data(), w.dx.data(), w.dgamma.data(), w.dbeta.data(), k.n(),
                                k.c(), k.s(), true, kEps);
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), dx), w.dx, dtype, kTolerance)) << "dx";
    EXPECT_TRUE(allClose(download(ctx(), dgamma), w.dgamma, kTolerance)) << "dgamma";
    EXPECT_TRUE(allClose(download(ctx(), dbeta), w.dbeta, kTolerance)) << "dbeta";
  }
}

// Bad shapes and arguments are refused by name before anything is recorded.
TEST_F(BatchNormTest, RefusesBadShapesBeforeRecording) {
  auto expectError = [](const std::function<void()>& f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "accepted; expected \"" << text << "\"";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expectError(
      [] {
        ops::batchNormStatsShape({4, 7, 3, 3}, {8}, {7}, kEps, true);
      },
      "batchNorm: x (4,7,3,3) needs gamma (7), got (8)");
  expectError([] { ops::batchNormStatsShape({7}, {7}, {7}, kEps, true); }, "at least (N,C)");
  expectError(
      [] {
        ops::batchNormStatsShape({1, 5}, {5}, {5}, kEps, true);
      },
      "more than one value per channel");
  EXPECT_EQ(ops::batchNormStatsShape({1, 5}, {5}, {5}, kEps, false), (Shape{5}));
  expectError([] { ops::batchNormStatsShape({2, 5}, {5}, {5}, -1.0f, true); }, "eps");

  auto x = poisoned(ctx(), {4, 3, 2}), y = poisoned(ctx(), {4, 3, 2});
  auto c3 = poisoned(ctx(), {3}), c3b = poisoned(ctx(), {3}), c4 = poisoned(ctx(), {4});
  auto m = poisoned(ctx(), {3}), r = poisoned(ctx(), {3});
  vk::Recorder rec(ctx());
  expectError(
      [&] { ops::batchNorm(rec, x.view(), c3.view(), c3b.view(), y.view(), c4.view(), r.view()); },
      "needs mean (3), got (4)");
  expectError(
      [&] { ops::batchNorm(rec, x.view(), c3.view(), c3b.view(), x.view(), m.view(), r.view()); },
      "y");
  const ops::BatchNormRunning bad{m.view(), r.view(), 1.5f};
  auto m2 = poisoned(ctx(), {3}), r2 = poisoned(ctx(), {3});
  expectError(
      [&] {
        ops::batchNorm(rec, x.view(), c3.view(), c3b.view(), y.view(), m2.view(), r2.view(), kEps,
                       &bad);
      },
      "momentum");
  expectError(
      [&] { ops::batchNormBackward(rec, x.view(), c3.view(), m.view(), r.view(), y.view(), {}); },
      "no gradient asked for");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
