// ops::maxPool2d, ops::avgPool2d and their backward passes against the CPU reference
// (ops/reference/pool2d.h) on odd shapes: overlapping windows, padding, strides past the
// kernel, non-square windows; 16-bit tensors; and the shape errors.
#include "vkgrad/ops/pool2d.h"

#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/pool2d.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Pool2dParams;
using ops::Shape;
using ops::Write;

class Pool2dTest : public VkTest {
 protected:
  Rng rng_;
};

struct Case {
  Shape x;
  Pool2dParams p;
};
const Case kCases[] = {
    {{2, 3, 8, 8}, Pool2dParams::square(2)},
    {{1, 2, 9, 7}, Pool2dParams::square(3, 2, 1)},  // overlapping, padded, odd
    {{2, 1, 11, 10}, {3, 2, 1, 2, 1, 1, false}},    // non-square, count_include_pad off
    {{1, 3, 7, 9}, {2, 3, 3, 2, 1, 0, true}},   // stride past the kernel: pixels no window reads
    {{3, 2, 5, 5}, {5, 5, 1, 1, 2, 2, false}},  // 5x5 "same" windows
};

// An argmax output: words no window index reaches, so unwritten ones show.
vk::Buffer poisonedWords(vk::Context& context, int64_t n) {
  return uploadWords(context, std::vector<uint32_t>(size_t(n), 0xdeadbeefu));
}

std::string describe(const Case& c) {
  return "x " + c.x.str() + " " + c.p.str() + (c.p.count_include_pad ? "" : " exclude pad");
}

std::vector<float> plus(std::vector<float> a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// Both poolings forward and backward, overwriting and accumulating; the argmax exactly (the
// inputs are random normal: no ties). A max is exact, sums of a few terms within 1e-6.
TEST_F(Pool2dTest, MatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Shape ys = ops::pool2dShape("test", c.x, c.p);
    const auto x = rng_.normal(size_t(c.x.numel())), dy = rng_.normal(size_t(ys.numel()));
    const auto init = rng_.normal(size_t(c.x.numel()));
    std::vector<uint32_t> want_arg;
    const auto want_max = ops::ref::maxPool2d(x, c.x, c.p, &want_arg);
    const auto want_dmax = ops::ref::maxPool2dBackward(dy, want_arg, c.x, c.p);
    const auto want_avg = ops::ref::avgPool2d(x, c.x, c.p);
    const auto want_davg = ops::ref::avgPool2dBackward(dy, c.x, c.p);

    auto tx = shiftedUpload(ctx(), c.x, x, DType::F32),
         tdy = shiftedUpload(ctx(), ys, dy, DType::F32);
    auto tmax = shiftedPoisoned(ctx(), ys, DType::F32),
         tavg = shiftedPoisoned(ctx(), ys, DType::F32);
    const vk::Buffer targ = poisonedWords(ctx(), ys.numel());
    auto dmax = shiftedPoisoned(ctx(), c.x, DType::F32),
         davg = shiftedPoisoned(ctx(), c.x, DType::F32);
    auto amax = shiftedUpload(ctx(), c.x, init, DType::F32),
         aavg = shiftedUpload(ctx(), c.x, init, DType::F32);
    vk::Recorder rec(ctx());
    ops::maxPool2d(rec, tx.view, tmax.view, ops::view(targ, ys, 0, DType::U32), c.p);
    ops::avgPool2d(rec, tx.view, tavg.view, c.p);
    ops::maxPool2dBackward(rec, tdy.view, ops::view(targ, ys, 0, DType::U32), dmax.view, c.p);
    ops::maxPool2dBackward(rec, tdy.view, ops::view(targ, ys, 0, DType::U32), amax.view, c.p,
                           Write::Accumulate);
    ops::avgPool2dBackward(rec, tdy.view, davg.view, c.p);
    ops::avgPool2dBackward(rec, tdy.view, aavg.view, c.p, Write::Accumulate);
    rec.submit();
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tmax), want_max, 0.0)) << "max";
    EXPECT_EQ(downloadWords(ctx(), targ, size_t(ys.numel())), want_arg) << "argmax";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tavg), want_avg, 1e-6)) << "avg";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), dmax), want_dmax, 1e-6)) << "dmax";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), amax), plus(want_dmax, init), 1e-6)) << "dmax +=";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), davg), want_davg, 1e-6)) << "davg";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), aavg), plus(want_davg, init), 1e-6)) << "davg +=";
  }
}

// x, y, dy and dx in f16 and bf16: one rounding per store.
TEST_F(Pool2dTest, SixteenBitTensors) {
  SCOPED_TRACE(rng_.describe());
  const Case& c = kCases[1];
  const Shape ys = ops::pool2dShape("test", c.x, c.p);
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dt));
    const auto x = ops::ref::roundTo(dt, rng_.normal(size_t(c.x.numel())));
    const auto dy = ops::ref::roundTo(dt, rng_.normal(size_t(ys.numel())));
    std::vector<uint32_t> arg;
    const auto want_max = ops::ref::maxPool2d(x, c.x, c.p, &arg);
    auto tx = shiftedUpload(ctx(), c.x, x, dt), tdy = shiftedUpload(ctx(), ys, dy, dt);
    auto tmax = shiftedPoisoned(ctx(), ys, dt), tavg = shiftedPoisoned(ctx(), ys, dt);
    const vk::Buffer targ = poisonedWords(ctx(), ys.numel());
    auto dmax = shiftedPoisoned(ctx(), c.x, dt), davg = shiftedPoisoned(ctx(), c.x, dt);
    vk::Recorder rec(ctx());
    ops::maxPool2d(rec, tx.view, tmax.view, ops::view(targ, ys, 0, DType::U32), c.p);
    ops::avgPool2d(rec, tx.view, tavg.view, c.p);
    ops::maxPool2dBackward(rec, tdy.view, ops::view(targ, ys, 0, DType::U32), dmax.view, c.p);
    ops::avgPool2dBackward(rec, tdy.view, davg.view, c.p);
    rec.submit();
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tmax), want_max, dt, 0.0)) << "max";
    EXPECT_TRUE(
        closeInFormat(downloadShifted(ctx(), tavg), ops::ref::avgPool2d(x, c.x, c.p), dt, 1e-6))
        << "avg";
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), dmax),
                              ops::ref::maxPool2dBackward(dy, arg, c.x, c.p), dt, 1e-6))
        << "dmax";
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), davg),
                              ops::ref::avgPool2dBackward(dy, c.x, c.p), dt, 1e-6))
        << "davg";
  }
}

TEST_F(Pool2dTest, RejectsBadShapesBeforeRecording) {
  auto x = poisoned(ctx(), {2, 3, 8, 8}), y = poisoned(ctx(), {2, 3, 4, 4});
  const vk::Buffer words = poisonedWords(ctx(), 2 * 3 * 4 * 4);
  const ops::TensorView arg = ops::view(words, {2, 3, 4, 4}, 0, DType::U32);
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::maxPool2d(rec, x.view(), y.view(), arg, Pool2dParams::square(3, 1, 2)); },
      "maxPool2d: x (2,3,8,8) kernel 3x3 stride 1x1 pad 2x2: padding must be in [0, kernel/2]");
  expectShapeError(
      rec, [&] { ops::avgPool2d(rec, x.view(), y.view(), Pool2dParams::square(9)); },
      "avgPool2d: x (2,3,8,8) kernel 9x9 stride 9x9 pad 0x0: the window is larger than the "
      "padded input");
  expectShapeError(
      rec, [&] { ops::maxPool2d(rec, x.view(), y.view(), arg, Pool2dParams::square(3)); },
      "y (2,3,4,4) must be (2,3,2,2)");
  expectShapeError(
      rec,
      [&] {
        ops::maxPool2d(rec, x.view(), y.view(), ops::view(words, {2, 3, 4, 4}),
                       Pool2dParams::square(2));
      },
      "maxPool2d: argmax must be u32");
}

}  // namespace
}  // namespace vkgrad::test
