#include "vkgrad/ops/log_softmax.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/log_softmax.h"

namespace vkgrad::test {
namespace {

// y = x - lse in fp32 against a double reference: lse is off by a few ulp of itself (the
// online sum is Kahan-compensated per lane), and x - lse rounds once more. Normalised by
// the largest |y|, which is at least log(N) or the spread of x.
constexpr double kTolerance = 2e-6;
// dx = dy - exp(y) * sum(dy): a few ulp of |dy| + |sum(dy)| per element.
constexpr double kBackwardTolerance = 1e-5;
constexpr float kInf = std::numeric_limits<float>::infinity();

using ops::SoftmaxVariant;

std::vector<float> reference(ops::Shape shape, const std::vector<float>& x) {
  std::vector<float> want(x.size());
  ops::ref::logSoftmax(x.data(), want.data(), shape.rows(), shape.back());
  return want;
}

std::vector<float> referenceBackward(ops::Shape shape, const std::vector<float>& y,
                                     const std::vector<float>& dy) {
  std::vector<float> want(y.size());
  ops::ref::logSoftmaxBackward(y.data(), dy.data(), want.data(), shape.rows(), shape.back());
  return want;
}

// Auto is SubgroupTexel on CPU devices and WorkgroupTexel on GPUs; WorkgroupStorage covers
// the other reduction (barriers, shared memory) and loads.
class LogSoftmaxTest : public VkTest, public ::testing::WithParamInterface<SoftmaxVariant> {
 protected:
  std::vector<float> run(ops::Shape shape, const std::vector<float>& x) {
    auto tx = upload(ctx(), shape, x), ty = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::logSoftmax(rec, tx.view(), ty.view(), GetParam());
    rec.submit();
    return download(ctx(), ty);
  }
};

TEST_P(LogSoftmaxTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shapes[] = {{1, 1}, {3, 7}, {17, 129}, {5, 1000}, {1, 100003}, {2, 3, 65}, {7}};
  for (const ops::Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    const auto x = rng.normal(shape.numel(), 0.5f, 3.0f);
    EXPECT_TRUE(allClose(run(shape, x), reference(shape, x), kTolerance));
  }
}

TEST_P(LogSoftmaxTest, IsStableForLargeInputs) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // exp(1e4) overflows fp32; only x - max keeps this finite.
  for (const ops::Shape& shape : {ops::Shape{3, 7}, ops::Shape{3, 1000}}) {
    SCOPED_TRACE(shape.str());
    auto x = rng.uniform(shape.numel(), -1e4f, 1e4f);
    for (int64_t i = 0; i < shape.back(); ++i) x[i] = 1e4f;  // all equal: -log(N) each
    const auto y = run(shape, x);
    EXPECT_TRUE(allClose(y, reference(shape, x), kTolerance));
    // y = (x - max) - log(sum), so the row max's own ulp (1e-3 at 1e4) does not show.
    for (int64_t i = 0; i < shape.back(); ++i)
      ASSERT_NEAR(y[i], -std::log(double(shape.back())), 2e-6) << i;
  }
}

TEST_P(LogSoftmaxTest, MasksInfiniteEntriesAndRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{6, 7}, ops::Shape{6, 1000}}) {
    SCOPED_TRACE(shape.str());
    const int64_t n = shape.back();
    auto x = rng.normal(shape.numel(), 0.0f, 2.0f);
    for (float& v : x)
      if (rng.below(3) == 0) v = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      x[i] = -kInf;                          // row 0: fully masked
      x[n + i] = i == n - 1 ? 3.0f : -kInf;  // row 1: only the last entry survives
    }
    const auto y = run(shape, x);
    EXPECT_TRUE(allClose(y, reference(shape, x), kTolerance));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], -kInf) << "fully masked row, element " << i;
    EXPECT_EQ(y[2 * n - 1], 0.0f);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_FALSE(std::isnan(y[i])) << i;
  }
}

TEST_P(LogSoftmaxTest, ReadsAndWritesViewsAtUnalignedOffsetsAndInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{5, 9}, ops::Shape{5, 300}}) {
    SCOPED_TRACE(shape.str());
    const auto x = rng.normal(shape.numel());
    const auto want = reference(shape, x);
    auto tx = paddedUpload(ctx(), x, 1);
    auto ty = poisoned(ctx(), {shape.numel() + 6});
    vk::Recorder rec(ctx());
    ops::logSoftmax(rec, ops::view(tx.buffer, shape, 4), ops::view(ty.buffer, shape, 12),
                    GetParam());
    rec.submit();
    const auto y = download(ctx(), ty);
    EXPECT_TRUE(allClose(unpadded(y, 3), want, kTolerance));
    EXPECT_TRUE(padsUntouched(y, 3));

    auto inplace = upload(ctx(), shape, x);
    vk::Recorder rec2(ctx());
    ops::logSoftmax(rec2, inplace.view(), inplace.view(), GetParam());
    rec2.submit();
    EXPECT_TRUE(allClose(download(ctx(), inplace), want, kTolerance));
  }
}

TEST_P(LogSoftmaxTest, BackwardMatchesCpuAndAccumulates) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shapes[] = {{1, 1}, {3, 7}, {17, 129}, {3, 1000}, {1, 20001}};
  for (const ops::Shape& shape : shapes) {
    for (ops::Write w : {ops::Write::Overwrite, ops::Write::Accumulate}) {
      const bool acc = w == ops::Write::Accumulate;
      SCOPED_TRACE(testing::Message() << shape.str() << (acc ? " accumulate" : " overwrite"));
      auto x = rng.normal(shape.numel(), 0.0f, 3.0f);
      for (float& v : x)
        if (rng.below(5) == 0) v = -kInf;  // y = -inf there: dx = dy
      const auto y = reference(shape, x);
      const auto dy = rng.normal(shape.numel()), old = rng.normal(shape.numel());
      auto want = referenceBackward(shape, y, dy);
      if (acc)
        for (size_t i = 0; i < want.size(); ++i) want[i] += old[i];
      // dx at an unaligned offset, the rest at the buffer start.
      auto ty = upload(ctx(), shape, y), tdy = upload(ctx(), shape, dy);
      auto tdx = acc ? paddedUpload(ctx(), old, 1) : poisoned(ctx(), {shape.numel() + 2});
      vk::Recorder rec(ctx());
      ops::logSoftmaxBackward(rec, ty.view(), tdy.view(), ops::view(tdx.buffer, shape, 4), w,
                              GetParam());
      rec.submit();
      const auto got = download(ctx(), tdx);
      EXPECT_TRUE(allClose(unpadded(got, 1), want, kBackwardTolerance));
      EXPECT_TRUE(padsUntouched(got, 1));
    }
  }
}

TEST_P(LogSoftmaxTest, BackwardInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shape{4, 77};
  const auto y = reference(shape, rng.normal(shape.numel()));
  const auto dy = rng.normal(shape.numel());
  auto ty = upload(ctx(), shape, y), tdy = upload(ctx(), shape, dy);
  vk::Recorder rec(ctx());
  ops::logSoftmaxBackward(rec, ty.view(), tdy.view(), ty.view(), ops::Write::Overwrite,
                          GetParam());  // dx over y
  rec.submit();
  EXPECT_TRUE(allClose(download(ctx(), ty), referenceBackward(shape, y, dy), kBackwardTolerance));
}

INSTANTIATE_TEST_SUITE_P(Variants, LogSoftmaxTest,
                         ::testing::Values(SoftmaxVariant::Auto, SoftmaxVariant::WorkgroupStorage),
                         [](const auto& info) { return ops::softmaxVariantName(info.param); });

// x and y (forward), y, dy and dx (backward, both write modes) in f16 or bf16, and mixed with
// f32, with some -inf (masked) entries. The references run on the rounded inputs; the backward
// is fed the forward's output as stored (rounded to the input format), as a training step
// would. The arithmetic is f32, so each output keeps the f32 test's tolerance plus the one
// rounding of its store (closeInFormat).
TEST_F(VkTest, LogSoftmaxSixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  struct Formats {
    DType in, out;
  };
  const ops::Shape shapes[] = {{1, 1}, {3, 7}, {5, 129}, {4, 1000}, {2, 3, 17}};
  for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                          Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
    for (const SoftmaxVariant variant :
         {SoftmaxVariant::Auto, SoftmaxVariant::WorkgroupStorage, SoftmaxVariant::SubgroupStorage})
      for (const ops::Shape& shape : shapes) {
        SCOPED_TRACE(testing::Message()
                     << ops::dtypeName(f.in) << " -> " << ops::dtypeName(f.out) << " "
                     << ops::softmaxVariantName(variant) << " " << shape.str());
        const int64_t n = shape.numel();
        auto x = rng.normal(n, 0.0f, 3.0f);
        for (float& v : x)
          if (rng.below(7) == 0) v = -kInf;
        x = ops::ref::roundTo(f.in, x);
        const auto y = reference(shape, x);
        const auto y_in = ops::ref::roundTo(f.in, y);
        const auto dy = ops::ref::roundTo(f.in, rng.normal(n));
        const auto old = ops::ref::roundTo(f.out, rng.normal(n));
        const auto want_dx = referenceBackward(shape, y_in, dy);
        std::vector<float> want_acc(want_dx);
        for (int64_t i = 0; i < n; ++i) want_acc[i] += old[i];
        auto tx = upload(ctx(), shape, x, f.in), ty = poisoned(ctx(), shape, f.out);
        auto ty_in = upload(ctx(), shape, y_in, f.in), tdy = upload(ctx(), shape, dy, f.in);
        auto tdx = poisoned(ctx(), shape, f.out), tacc = upload(ctx(), shape, old, f.out);
        vk::Recorder rec(ctx());
        ops::logSoftmax(rec, tx.view(), ty.view(), variant);
        ops::logSoftmaxBackward(rec, ty_in.view(), tdy.view(), tdx.view(), ops::Write::Overwrite,
                                variant);
        ops::logSoftmaxBackward(rec, ty_in.view(), tdy.view(), tacc.view(), ops::Write::Accumulate,
                                variant);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), ty), y, f.out, kTolerance)) << "y";
        EXPECT_TRUE(closeInFormat(download(ctx(), tdx), want_dx, f.out, kBackwardTolerance))
            << "dx";
        EXPECT_TRUE(closeInFormat(download(ctx(), tacc), want_acc, f.out, kBackwardTolerance))
            << "dx accumulated";
      }
}

// f16 views at an odd element (2 bytes into their buffers), y over x; an output in place of an
// input of another format is refused.
TEST_F(VkTest, LogSoftmaxSixteenBitAtOddOffsetInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  const ops::Shape shape{5, 33};
  const int64_t n = shape.numel();
  const auto x = ops::ref::roundTo(DType::F16, rng.normal(n, 0.0f, 2.0f));
  std::vector<float> padded(n + 2, 1.0f);
  std::copy(x.begin(), x.end(), padded.begin() + 1);
  auto tx = upload(ctx(), {n + 2}, padded, DType::F16);
  const auto in_place = ops::view(tx.buffer, shape, 2, DType::F16);
  vk::Recorder rec(ctx());
  ops::logSoftmax(rec, in_place, in_place);
  rec.submit();
  const auto got = download(ctx(), tx);
  EXPECT_TRUE(closeInFormat(unpadded(got, 1), reference(shape, x), DType::F16, kTolerance));
  EXPECT_EQ(got.front(), 1.0f);
  EXPECT_EQ(got.back(), 1.0f);
  auto y = upload(ctx(), shape, x);
  expectShapeError(
      ctx(),
      [&](vk::Recorder& r) {
        ops::logSoftmaxBackward(r, y.view(), ops::view(y.buffer, shape, 0, DType::BF16),
                                ops::view(y.buffer, shape, 0, DType::BF16));
      },
      "logSoftmaxBackward: dx (bf16) in place of y (f32) needs its dtype");
}

// loss = sum_i w_i logSoftmax(x)_i with the GPU forward; the analytic gradient is the GPU
// backward with dy = w, fed the GPU forward's y.
TEST_F(VkTest, LogSoftmaxBackwardPassesGradCheck) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{3, 7}, ops::Shape{2, 129}}) {
    SCOPED_TRACE(shape.str());
    auto x = rng.normal(shape.numel(), 0.0f, 2.0f);
    const auto w = rng.normal(shape.numel());
    auto forward = [&] {
      auto tx = upload(ctx(), shape, x), ty = poisoned(ctx(), shape);
      vk::Recorder rec(ctx());
      ops::logSoftmax(rec, tx.view(), ty.view());
      rec.submit();
      return download(ctx(), ty);
    };
    auto ty = upload(ctx(), shape, forward()), tw = upload(ctx(), shape, w);
    auto tdx = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::logSoftmaxBackward(rec, ty.view(), tw.view(), tdx.view());
    rec.submit();
    const auto grad = download(ctx(), tdx);
    // Every output moves with x_j through the lse, so the loss sums N rounded outputs of
    // magnitude ~log N: their rounding noise over 2h = 2e-3 came to ~1e-3 of the gradient.
    // h = 1e-2 makes it 10x smaller; the truncation error (h^2 times the third derivative)
    // stays below 1e-4.
    GradCheckOptions options;
    options.rel_step = 1e-2;
    EXPECT_TRUE(
        checkGradients([&] { return weightedSum(forward(), w); }, {{"x", &x, grad}}, rng, options));
  }
}

TEST_F(VkTest, LogSoftmaxRejectsBadShapesBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 7}, rng.uniform(28));
  auto y = poisoned(ctx(), {4, 8});
  auto small = poisoned(ctx(), {4, 6});
  auto big = poisoned(ctx(), {64});
  const auto fwd = [](ops::TensorView a, ops::TensorView b) {
    return [=](vk::Recorder& rec) { ops::logSoftmax(rec, a, b); };
  };
  const auto bwd = [](ops::TensorView a, ops::TensorView b, ops::TensorView c) {
    return [=](vk::Recorder& rec) { ops::logSoftmaxBackward(rec, a, b, c); };
  };
  expectShapeError(ctx(), fwd(x.view(), y.view()),
                   "logSoftmax: x (4,7), y (4,8): y must be shaped like x");
  expectShapeError(ctx(), fwd(ops::view(x.buffer, {4, 0}), ops::view(y.buffer, {4, 0})),
                   "logSoftmax: x (4,0), y (4,0): x is empty");
  expectShapeError(ctx(), fwd(x.view(), ops::view(small.buffer, {4, 7})), "logSoftmax: y (4,7)");
  expectShapeError(ctx(), fwd(x.view(), ops::view(y.buffer, {4, 7}, 0, ops::DType::U32)),
                   "logSoftmax: y must be f32, f16 or bf16, got u32");
  expectShapeError(ctx(), fwd(ops::view(big.buffer, {2, 7}), ops::view(big.buffer, {2, 7}, 4)),
                   "logSoftmax: y (2,7) overlaps x (2,7)");
  expectShapeError(ctx(), bwd(x.view(), x.view(), y.view()),
                   "logSoftmaxBackward: y (4,7), dy (4,7), dx (4,8): dx must be shaped like y");
  expectShapeError(
      ctx(),
      bwd(x.view(), ops::view(x.buffer, {4, 7}, 0, ops::DType::U32), ops::view(y.buffer, {4, 7})),
      "logSoftmaxBackward: dy must be f32, f16 or bf16, got u32");
  expectShapeError(ctx(),
                   bwd(ops::view(big.buffer, {2, 7}), ops::view(big.buffer, {2, 7}, 64),
                       ops::view(big.buffer, {2, 7}, 68)),
                   "logSoftmaxBackward: dx (2,7) overlaps dy (2,7)");
}

}  // namespace
}  // namespace vkgrad::test
