#include "vkgrad/ops/softmax.h"

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
#include "vkgrad/ops/reference/softmax.h"

namespace vkgrad::test {
namespace {

// Each output is exp(x - max) / sum in fp32 against a double reference: the exp and the
// rounding of x - max cost a few ulp, the sum of up to 1e5 terms (Kahan-compensated per
// lane, then a tree) a few more. Errors seen on lavapipe stay below 5e-7 of the largest output.
constexpr double kTolerance = 2e-6;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Runs the op on x (y poisoned first) and returns y.
std::vector<float> runSoftmax(vk::Context& context, ops::Shape shape, const std::vector<float>& x,
                              ops::SoftmaxVariant variant) {
  auto dx = upload(context, shape, x);
  auto dy = poisoned(context, shape);
  vk::Recorder rec(context);
  ops::softmax(rec, dx.view(), dy.view(), variant);
  rec.submit();
  return download(context, dy);
}

std::vector<float> reference(ops::Shape shape, const std::vector<float>& x) {
  std::vector<float> want(x.size());
  ops::ref::softmax(x.data(), want.data(), shape.rows(), shape.back());
  return want;
}

// Every row of y sums to 1 (summed in double), except all -inf rows, which are all zero.
::testing::AssertionResult rowsSumToOne(const std::vector<float>& y, const std::vector<float>& x,
                                        int64_t n) {
  for (size_t r = 0; r * n < y.size(); ++r) {
    double sum = 0.0;
    bool masked = true;
    for (int64_t i = 0; i < n; ++i) sum += y[r * n + i], masked &= x[r * n + i] == -kInf;
    const double want = masked ? 0.0 : 1.0;
    // Summing n rounded outputs adds up to n/2 ulp of the largest; 1e-5 covers n = 1e5.
    if (!(std::fabs(sum - want) <= 1e-5))
      return ::testing::AssertionFailure() << "row " << r << " sums to " << sum;
  }
  return ::testing::AssertionSuccess();
}

class SoftmaxTest : public VkTest, public ::testing::WithParamInterface<ops::SoftmaxVariant> {
 protected:
  // The subgroup-per-row variants are only promised where a workgroup of subgroupSize
  // invocations is one subgroup (CPU drivers; most GPUs too). They run on every device here:
  // a device that breaks the promise fails these tests rather than skipping them.
  std::vector<float> run(ops::Shape shape, const std::vector<float>& x) {
    return runSoftmax(ctx(), shape, x, GetParam());
  }
};

TEST_P(SoftmaxTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Short rows take the invocation-per-row path, long ones a workgroup (or subgroup) per
  // row; the switch is at N = 32 on GPUs and 64 on CPU devices. N % 4 == 0 takes the texel
  // layouts' 4-column path: rows each lane holds whole ((3,1024): 32 texels a lane at 8 lanes,
  // none past the row; (2,4096): 128, the most a CPU device's lane holds; (5,1000), (7,68): the
  // last texel partly past it) or reads three times ((2,4100), (2,100000)).
  const ops::Shape shapes[] = {{1, 1},     {3, 7},    {33, 257}, {5, 1000}, {2, 100003}, {1000, 7},
                               {2, 3, 17}, {4, 32},   {4, 33},   {4, 64},   {4, 65},     {7},
                               {3, 1024},  {2, 4096}, {7, 68},   {2, 4100}, {2, 100000}};
  for (const ops::Shape& shape : shapes) {
    SCOPED_TRACE(shape.str());
    const auto x = rng.normal(shape.numel(), 0.5f, 3.0f);
    const auto y = run(shape, x);
    EXPECT_TRUE(allClose(y, reference(shape, x), kTolerance));
    EXPECT_TRUE(rowsSumToOne(y, x, shape.back()));
  }
}

TEST_P(SoftmaxTest, HandlesManyShortRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // More rows than a grid of 65535 invocations: the row loop must stride.
  const ops::Shape shape{100000, 7};
  const auto x = rng.uniform(shape.numel(), -5.0f, 5.0f);
  const auto y = run(shape, x);
  EXPECT_TRUE(allClose(y, reference(shape, x), kTolerance));
  EXPECT_TRUE(rowsSumToOne(y, x, shape.back()));
}

TEST_P(SoftmaxTest, IsStableForLargeInputs) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // exp(1e4) overflows fp32; only x - max keeps this finite.
  for (const ops::Shape& shape : {ops::Shape{3, 7}, ops::Shape{5, 1000}, ops::Shape{2, 20001}}) {
    SCOPED_TRACE(shape.str());
    auto x = rng.uniform(shape.numel(), -1e4f, 1e4f);
    // Rows of all-equal huge values give a uniform distribution, not NaN.
    for (int64_t i = 0; i < shape.back(); ++i) x[i] = -1e4f;
    const auto y = run(shape, x);
    EXPECT_TRUE(allClose(y, reference(shape, x), kTolerance));
    EXPECT_TRUE(rowsSumToOne(y, x, shape.back()));
  }
}

TEST_P(SoftmaxTest, MasksInfiniteEntriesAndZeroesMaskedRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{6, 7}, ops::Shape{6, 1000}, ops::Shape{4, 40000}}) {
    SCOPED_TRACE(shape.str());
    const int64_t n = shape.back();
    auto x = rng.normal(shape.numel(), 0.0f, 2.0f);
    for (float& v : x)  // about a third of the entries masked
      if (rng.below(3) == 0) v = -kInf;
    for (int64_t i = 0; i < n; ++i) {
      x[i] = -kInf;                                  // row 0: fully masked
      x[n + i] = i == n - 1 ? 1.0f : -kInf;          // row 1: only the last entry survives
      x[2 * n + i] = i == 0 ? -kInf : x[2 * n + i];  // row 2: the first (a lane's start) masked
    }
    const auto y = run(shape, x);
    EXPECT_TRUE(allClose(y, reference(shape, x), kTolerance));
    EXPECT_TRUE(rowsSumToOne(y, x, n));
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], 0.0f) << "fully masked row, element " << i;
    EXPECT_NEAR(y[2 * n - 1], 1.0f, 1e-6f);
  }
}

TEST_P(SoftmaxTest, RunsInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{9, 5}, ops::Shape{9, 513}}) {
    SCOPED_TRACE(shape.str());
    const auto x = rng.normal(shape.numel());
    auto dx = upload(ctx(), shape, x);
    vk::Recorder rec(ctx());
    ops::softmax(rec, dx.view(), dx.view(), GetParam());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dx), reference(shape, x), kTolerance));
  }
}

TEST_P(SoftmaxTest, ReadsAndWritesViewsAtOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // x and y are the middles of larger buffers, at offsets the device allows for storage
  // buffers; the elements around y must stay untouched.
  const uint64_t align = ctx().info().min_storage_offset_alignment;
  for (const ops::Shape& shape : {ops::Shape{5, 9}, ops::Shape{5, 300}}) {
    SCOPED_TRACE(shape.str());
    const int64_t pad = int64_t(align) / 4 * 3;
    const auto x = rng.normal(shape.numel() + 2 * pad);
    auto dx = upload(ctx(), {int64_t(x.size())}, x);
    auto dy = poisoned(ctx(), {int64_t(x.size())});
    vk::Recorder rec(ctx());
    ops::softmax(rec, ops::view(dx.buffer, shape, pad * 4), ops::view(dy.buffer, shape, pad * 4),
                 GetParam());
    rec.submit();
    const auto y = download(ctx(), dy);
    EXPECT_TRUE(allClose(unpadded(y, pad), reference(shape, unpadded(x, pad)), kTolerance));
    EXPECT_TRUE(padsUntouched(y, pad));
  }
}

TEST_P(SoftmaxTest, ReadsAndWritesViewsAtUnalignedOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (int64_t pad : {1, 3}) {
    for (const ops::Shape& shape : {ops::Shape{5, 9}, ops::Shape{5, 300}}) {
      SCOPED_TRACE(testing::Message() << shape.str() << " at element " << pad);
      const auto x = rng.normal(shape.numel());
      auto dx = paddedUpload(ctx(), x, pad);
      auto dy = poisoned(ctx(), {shape.numel() + 2 * pad});
      vk::Recorder rec(ctx());
      ops::softmax(rec, ops::view(dx.buffer, shape, pad * 4), ops::view(dy.buffer, shape, pad * 4),
                   GetParam());
      rec.submit();
      const auto y = download(ctx(), dy);
      EXPECT_TRUE(allClose(unpadded(y, pad), reference(shape, x), kTolerance));
      EXPECT_TRUE(padsUntouched(y, pad));
    }
  }
}

// dx = y * (dy - sum(dy * y)): a difference of O(1) terms scaled by y; the fp32 dot product
// over a row (Kahan per lane) costs a few ulp of sum |dy * y|.
constexpr double kBackwardTolerance = 1e-5;

std::vector<float> referenceBackward(ops::Shape shape, const std::vector<float>& y,
                                     const std::vector<float>& dy) {
  std::vector<float> want(y.size());
  ops::ref::softmaxBackward(y.data(), dy.data(), want.data(), shape.rows(), shape.back());
  return want;
}

// The 4-column path with 16-byte fetches but an output one element off a 16-byte boundary
// (stored one value at a time), forward and backward, both write modes, and in place.
TEST_P(SoftmaxTest, FourColumnRowsIntoAnOutputOffTheTexelGrid) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{5, 1000}, ops::Shape{2, 4100}}) {
    SCOPED_TRACE(shape.str());
    const int64_t n = shape.numel();
    const auto x = rng.normal(n, 0.0f, 2.0f);
    const auto want = reference(shape, x);
    auto tx = upload(ctx(), shape, x);
    {
      auto ty = poisoned(ctx(), {n + 2});
      vk::Recorder rec(ctx());
      ops::softmax(rec, tx.view(), ops::view(ty.buffer, shape, 4), GetParam());
      rec.submit();
      const auto got = download(ctx(), ty);
      EXPECT_TRUE(allClose(unpadded(got, 1), want, kTolerance));
      EXPECT_TRUE(padsUntouched(got, 1));
    }
    const auto dy = rng.normal(n), old = rng.normal(n);
    const auto want_dx = referenceBackward(shape, want, dy);
    auto ty = upload(ctx(), shape, want), tdy = upload(ctx(), shape, dy);
    for (ops::Write w : {ops::Write::Overwrite, ops::Write::Accumulate}) {
      std::vector<float> padded(size_t(n + 2), 0.0f);
      std::copy(old.begin(), old.end(), padded.begin() + 1);
      auto tdx = upload(ctx(), {n + 2}, padded);
      vk::Recorder rec(ctx());
      ops::softmaxBackward(rec, ty.view(), tdy.view(), ops::view(tdx.buffer, shape, 4), w,
                           GetParam());
      rec.submit();
      const auto got = unpadded(download(ctx(), tdx), 1);
      if (w == ops::Write::Overwrite) {
        EXPECT_TRUE(allClose(got, want_dx, kBackwardTolerance));
      } else {
        EXPECT_TRUE(accumulatedClose(got, want_dx, old, kBackwardTolerance));
      }
    }
    {  // y over x, dx over dy, on the texel grid
      vk::Recorder rec(ctx());
      ops::softmax(rec, tx.view(), tx.view(), GetParam());
      ops::softmaxBackward(rec, ty.view(), tdy.view(), tdy.view(), ops::Write::Overwrite,
                           GetParam());
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), tx), want, kTolerance));
      EXPECT_TRUE(allClose(download(ctx(), tdy), want_dx, kBackwardTolerance));
    }
  }
}

TEST_P(SoftmaxTest, BackwardMatchesCpuOnOddShapesAndAccumulates) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // (2,4096): 128 texels a lane at 8 lanes, the most a CPU device's lane holds.
  const ops::Shape shapes[] = {{1, 1},     {3, 7},  {17, 129}, {3, 1000}, {1, 20001},
                               {2, 3, 65}, {7, 68}, {3, 1024}, {2, 4096}, {2, 4100}};
  for (const ops::Shape& shape : shapes) {
    for (ops::Write w : {ops::Write::Overwrite, ops::Write::Accumulate}) {
      const bool acc = w == ops::Write::Accumulate;
      SCOPED_TRACE(testing::Message() << shape.str() << (acc ? " accumulate" : " overwrite"));
      auto x = rng.normal(shape.numel(), 0.0f, 3.0f);
      for (float& v : x)
        if (rng.below(5) == 0) v = -kInf;  // masked entries: y = 0, so dx = 0 there
      const auto y = reference(shape, x);
      const auto dy = rng.normal(shape.numel());
      const auto old = rng.normal(shape.numel());
      auto want = referenceBackward(shape, y, dy);
      if (acc)
        for (size_t i = 0; i < want.size(); ++i) want[i] += old[i];
      auto ty = upload(ctx(), shape, y), tdy = upload(ctx(), shape, dy);
      auto tdx = acc ? upload(ctx(), shape, old) : poisoned(ctx(), shape);
      vk::Recorder rec(ctx());
      ops::softmaxBackward(rec, ty.view(), tdy.view(), tdx.view(), w, GetParam());
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), tdx), want, kBackwardTolerance));
    }
  }
}

TEST_P(SoftmaxTest, BackwardAtUnalignedOffsetsAndInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{4, 9}, ops::Shape{3, 301}}) {
    SCOPED_TRACE(shape.str());
    const auto y = reference(shape, rng.normal(shape.numel()));
    const auto dy = rng.normal(shape.numel());
    const auto want = referenceBackward(shape, y, dy);
    {  // y, dy and dx each at a different 4-byte offset
      auto ty = paddedUpload(ctx(), y, 1), tdy = paddedUpload(ctx(), dy, 2);
      auto tdx = poisoned(ctx(), {shape.numel() + 6});
      vk::Recorder rec(ctx());
      ops::softmaxBackward(rec, ops::view(ty.buffer, shape, 4), ops::view(tdy.buffer, shape, 8),
                           ops::view(tdx.buffer, shape, 12), ops::Write::Overwrite, GetParam());
      rec.submit();
      const auto got = download(ctx(), tdx);
      EXPECT_TRUE(allClose(unpadded(got, 3), want, kBackwardTolerance));
      EXPECT_TRUE(padsUntouched(got, 3));
    }
    {  // dx written over dy
      auto ty = upload(ctx(), shape, y), tdy = upload(ctx(), shape, dy);
      vk::Recorder rec(ctx());
      ops::softmaxBackward(rec, ty.view(), tdy.view(), tdy.view(), ops::Write::Overwrite,
                           GetParam());
      rec.submit();
      EXPECT_TRUE(allClose(download(ctx(), tdy), want, kBackwardTolerance));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, SoftmaxTest,
                         ::testing::Values(ops::SoftmaxVariant::Auto,
                                           ops::SoftmaxVariant::WorkgroupStorage,
                                           ops::SoftmaxVariant::WorkgroupTexel,
                                           ops::SoftmaxVariant::SubgroupStorage,
                                           ops::SoftmaxVariant::SubgroupTexel),
                         [](const auto& info) { return ops::softmaxVariantName(info.param); });

// Input and output formats of one 16-bit case: every tensor 16-bit, or mixed with f32.
struct Formats {
  ops::DType in, out;
};
constexpr Formats kSixteenBitFormats[] = {{ops::DType::F16, ops::DType::F16},
                                          {ops::DType::BF16, ops::DType::BF16},
                                          {ops::DType::F32, ops::DType::BF16},
                                          {ops::DType::BF16, ops::DType::F32}};
// The storage layouts (the texel ones read f32 only): Auto takes them for 16-bit inputs.
constexpr ops::SoftmaxVariant kStorageVariants[] = {ops::SoftmaxVariant::Auto,
                                                    ops::SoftmaxVariant::WorkgroupStorage,
                                                    ops::SoftmaxVariant::SubgroupStorage};

// x and y (forward), y, dy and dx (backward, both write modes) in f16 or bf16, and mixed with
// f32. The references run on the rounded inputs; the backward is fed the forward's output as
// stored (rounded to the input format), as a training step would. The arithmetic is f32, so
// each output keeps the f32 test's tolerance plus the one rounding of its store (closeInFormat).
TEST_F(VkTest, SoftmaxSixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const ops::Shape shapes[] = {{1, 1}, {3, 7}, {5, 129}, {4, 1000}, {2, 3, 17}};
  for (const Formats f : kSixteenBitFormats)
    for (const ops::SoftmaxVariant variant : kStorageVariants)
      for (const ops::Shape& shape : shapes) {
        SCOPED_TRACE(testing::Message()
                     << ops::dtypeName(f.in) << " -> " << ops::dtypeName(f.out) << " "
                     << ops::softmaxVariantName(variant) << " " << shape.str());
        const int64_t n = shape.numel();
        const auto x = ops::ref::roundTo(f.in, rng.normal(n, 0.5f, 3.0f));
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
        ops::softmax(rec, tx.view(), ty.view(), variant);
        ops::softmaxBackward(rec, ty_in.view(), tdy.view(), tdx.view(), ops::Write::Overwrite,
                             variant);
        ops::softmaxBackward(rec, ty_in.view(), tdy.view(), tacc.view(), ops::Write::Accumulate,
                             variant);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), ty), y, f.out, kTolerance)) << "y";
        EXPECT_TRUE(closeInFormat(download(ctx(), tdx), want_dx, f.out, kBackwardTolerance))
            << "dx";
        EXPECT_TRUE(closeInFormat(download(ctx(), tacc), want_acc, f.out, kBackwardTolerance))
            << "dx accumulated";
      }
}

// bf16 views at an odd element (2 bytes into their buffers), in place of each other where the
// formats agree; an output in place of an input of another format is refused.
TEST_F(VkTest, SoftmaxSixteenBitAtOddOffsetsAndInPlace) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  const ops::Shape shape{3, 77};
  const int64_t n = shape.numel();
  const auto x = ops::ref::roundTo(DType::BF16, rng.normal(n, 0.0f, 2.0f));
  const auto y = reference(shape, x);
  std::vector<float> padded(n + 2, 1.0f);
  std::copy(x.begin(), x.end(), padded.begin() + 1);
  auto tx = upload(ctx(), {n + 2}, padded, DType::BF16);
  auto ty = poisoned(ctx(), {n + 2}, DType::BF16);
  {
    vk::Recorder rec(ctx());
    ops::softmax(rec, ops::view(tx.buffer, shape, 2, DType::BF16),
                 ops::view(ty.buffer, shape, 2, DType::BF16));
    rec.submit();
    const auto got = download(ctx(), ty);
    EXPECT_TRUE(closeInFormat(unpadded(got, 1), y, DType::BF16, kTolerance));
    EXPECT_TRUE(padsUntouched(got, 1));
  }
  {  // y over x
    const auto in_place = ops::view(tx.buffer, shape, 2, DType::BF16);
    vk::Recorder rec(ctx());
    ops::softmax(rec, in_place, in_place);
    rec.submit();
    EXPECT_TRUE(closeInFormat(unpadded(download(ctx(), tx), 1), y, DType::BF16, kTolerance));
  }
  {  // dx over y, y at the odd offset
    const auto y_in = ops::ref::roundTo(DType::BF16, y);
    const auto dy = ops::ref::roundTo(DType::BF16, rng.normal(n));
    std::copy(y_in.begin(), y_in.end(), padded.begin() + 1);
    auto tpy = upload(ctx(), {n + 2}, padded, DType::BF16),
         tdy = upload(ctx(), shape, dy, DType::BF16);
    const auto in_place = ops::view(tpy.buffer, shape, 2, DType::BF16);
    vk::Recorder rec(ctx());
    ops::softmaxBackward(rec, in_place, tdy.view(), in_place);
    rec.submit();
    EXPECT_TRUE(closeInFormat(unpadded(download(ctx(), tpy), 1), referenceBackward(shape, y_in, dy),
                              DType::BF16, kBackwardTolerance));
  }
  auto wide = poisoned(ctx(), shape);
  test::expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::softmax(rec, ops::view(wide.buffer, shape, 0, DType::F16), wide.view());
      },
      "softmax: y (f32) in place of x (f16) needs its dtype");
}

// The op throws a ShapeError containing `expected` and records nothing.
void expectShapeError(vk::Context& context, const ops::TensorView& x, const ops::TensorView& y,
                      const std::string& expected) {
  test::expectShapeError(
      context, [&](vk::Recorder& rec) { ops::softmax(rec, x, y); }, expected);
}

TEST_F(VkTest, SoftmaxRejectsBadShapesBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 7}, rng.uniform(28));
  auto y = poisoned(ctx(), {4, 8});
  auto small = poisoned(ctx(), {4, 6});
  expectShapeError(ctx(), x.view(), y.view(), "softmax: x (4,7), y (4,8): y must be shaped like x");
  expectShapeError(ctx(), ops::view(x.buffer, {0, 7}), ops::view(y.buffer, {0, 7}),
                   "softmax: x (0,7), y (0,7): x is empty");
  expectShapeError(ctx(), ops::view(x.buffer, {4, 0}), ops::view(y.buffer, {4, 0}),
                   "softmax: x (4,0), y (4,0): x is empty");
  // Right shape, but the buffer behind y holds only 4x6 floats.
  expectShapeError(ctx(), x.view(), ops::view(small.buffer, {4, 7}), "softmax: y (4,7)");
  expectShapeError(ctx(), x.view(), ops::view(y.buffer, {4, 7}, 0, ops::DType::U32),
                   "softmax: y must be f32, f16 or bf16, got u32");
}

// loss = sum_i w_i softmax(x)_i with the GPU forward; the analytic gradient is the GPU
// backward with dy = w, fed the GPU forward's y.
TEST_F(VkTest, SoftmaxBackwardPassesGradCheck) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::Shape& shape : {ops::Shape{3, 7}, ops::Shape{2, 129}}) {
    SCOPED_TRACE(shape.str());
    auto x = rng.normal(shape.numel(), 0.0f, 2.0f);
    const auto w = rng.normal(shape.numel());
    auto forward = [&] {
      auto tx = upload(ctx(), shape, x), ty = poisoned(ctx(), shape);
      vk::Recorder rec(ctx());
      ops::softmax(rec, tx.view(), ty.view());
      rec.submit();
      return download(ctx(), ty);
    };
    auto ty = upload(ctx(), shape, forward()), tw = upload(ctx(), shape, w);
    auto tdx = poisoned(ctx(), shape);
    vk::Recorder rec(ctx());
    ops::softmaxBackward(rec, ty.view(), tw.view(), tdx.view());
    rec.submit();
    const auto grad = download(ctx(), tdx);
    EXPECT_TRUE(checkGradients([&] { return weightedSum(forward(), w); }, {{"x", &x, grad}}, rng));
  }
}

TEST_F(VkTest, SoftmaxBackwardRejectsBadShapesBeforeRecording) {
  Rng rng;
  auto y = upload(ctx(), {4, 7}, rng.uniform(28));
  auto dy = upload(ctx(), {4, 7}, rng.uniform(28));
  auto dx = poisoned(ctx(), {4, 8});
  auto big = poisoned(ctx(), {64});
  auto empty = poisoned(ctx(), {4});
  const auto expect = [&](const ops::TensorView& vy, const ops::TensorView& vdy,
                          const ops::TensorView& vdx, const std::string& expected) {
    vk::Recorder rec(ctx());
    try {
      ops::softmaxBackward(rec, vy, vdy, vdx);
      ADD_FAILURE() << "no ShapeError, expected: " << expected;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_EQ(rec.dispatchCount(), 0u);
  };
  expect(y.view(), dy.view(), dx.view(),
         "softmaxBackward: y (4,7), dy (4,7), dx (4,8): dx must be shaped like y");
  expect(y.view(), ops::view(dy.buffer, {7, 4}), ops::view(dx.buffer, {4, 7}),
         "dy must be shaped like y");
  expect(y.view(), ops::view(dy.buffer, {4, 7}, 0, ops::DType::U32), ops::view(dx.buffer, {4, 7}),
         "softmaxBackward: dy must be f32, f16 or bf16, got u32");
  expect(ops::view(empty.buffer, {0, 7}), ops::view(empty.buffer, {0, 7}),
         ops::view(empty.buffer, {0, 7}),
         "softmaxBackward: y (0,7), dy (0,7), dx (0,7): y is empty");
  // dx partly overlapping dy (same buffer, shifted by one element).
  expect(ops::view(big.buffer, {2, 7}, 0), ops::view(big.buffer, {2, 7}, 64),
         ops::view(big.buffer, {2, 7}, 68), "softmaxBackward: dx (2,7) overlaps dy (2,7)");
}

}  // namespace
}  // namespace vkgrad::test
