// ops::conv2d (im2col + matmul, and the direct kernel) and its backward against the CPU
// reference (ops/reference/conv2d.h) on odd shapes with strides, asymmetric padding, dilation
// and groups; chunked scratch; 16-bit activations; and the shape errors.
#include "vkgrad/ops/conv2d.h"

#include <cmath>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/conv2d.h"
#include "vkgrad/ops/reference/half.h"

namespace vkgrad::test {
namespace {

using ops::Conv2dParams;
using ops::DType;
using ops::Shape;
using ops::Write;

class Conv2dTest : public VkTest {
 protected:
  Rng rng_;
};

struct Case {
  Shape x, w;
  Conv2dParams p;
  bool bias;
};
// Odd sizes everywhere; 3x3 "same", strides, asymmetric padding, dilation, a 1x1, a
// non-square kernel, two groups and a depthwise convolution.
const Case kCases[] = {
    {{2, 3, 9, 7}, {5, 3, 3, 3}, Conv2dParams::square(1, 1), true},
    {{3, 2, 11, 10}, {3, 2, 3, 3}, Conv2dParams::square(2, 0), false},
    {{1, 3, 8, 9}, {4, 3, 2, 3}, {2, 1, 1, 2, 0, 1, 1, 1, 1}, true},
    {{2, 2, 13, 11}, {3, 2, 3, 3}, Conv2dParams::square(1, 2, 2), true},
    {{2, 5, 6, 7}, {7, 5, 1, 1}, Conv2dParams::square(1, 0), true},
    {{2, 4, 9, 8}, {6, 2, 3, 3}, Conv2dParams::square(2, 1, 1, 2), true},
    {{1, 6, 7, 7}, {6, 1, 5, 5}, {1, 2, 2, 2, 2, 1, 1, 1, 6}, false},
};

std::vector<float> nans(int64_t n) {
  return std::vector<float>(size_t(n), std::nanf(""));
}

std::string describe(const Case& c) {
  return "x " + c.x.str() + " w " + c.w.str() + " " + c.p.str() + (c.bias ? " bias" : "");
}

// Forward (both routes) and the three gradients, overwritten and accumulated, against the
// reference. Sums of up to ~100 products in f32 against double: tolerance 1e-5 normalised.
// Every view starts one element into its buffer; scratch holds one image at a time on every
// other case, so those run in chunks.
TEST_F(Conv2dTest, MatchesTheReference) {
  SCOPED_TRACE(rng_.describe());
  int index = 0;
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Shape ys = ops::conv2dShape(c.x, c.w, nullptr, c.p);
    const Shape bs{c.w[0]};
    const auto x = rng_.normal(size_t(c.x.numel())), w = rng_.normal(size_t(c.w.numel()));
    const auto bias = c.bias ? rng_.normal(size_t(c.w[0])) : std::vector<float>{};
    const auto dy = rng_.normal(size_t(ys.numel()));
    const auto init_dx = rng_.normal(size_t(c.x.numel()));
    const auto init_dw = rng_.normal(size_t(c.w.numel())), init_db = rng_.normal(size_t(c.w[0]));
    const std::vector<float> want = ops::ref::conv2d(x, c.x, w, c.w, bias, c.p);
    const ops::ref::Conv2dGradsRef g = ops::ref::conv2dBackward(x, c.x, w, c.w, dy, c.p);
    auto added = [](std::vector<float> a, const std::vector<float>& b) {
      for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
      return a;
    };

    auto tx = shiftedUpload(ctx(), c.x, x, DType::F32);
    auto tw = shiftedUpload(ctx(), c.w, w, DType::F32);
    auto tb = shiftedUpload(ctx(), bs, c.bias ? bias : nans(c.w[0]), DType::F32);
    auto ty = shiftedPoisoned(ctx(), ys, DType::F32), tyd = shiftedPoisoned(ctx(), ys, DType::F32);
    auto tdy = shiftedUpload(ctx(), ys, dy, DType::F32);
    auto tdx = shiftedPoisoned(ctx(), c.x, DType::F32),
         tdw = shiftedPoisoned(ctx(), c.w, DType::F32);
    auto tdb = shiftedPoisoned(ctx(), bs, DType::F32);
    auto adx = shiftedUpload(ctx(), c.x, init_dx, DType::F32);
    auto adw = shiftedUpload(ctx(), c.w, init_dw, DType::F32);
    auto adb = shiftedUpload(ctx(), bs, init_db, DType::F32);
    const bool chunked = index++ % 2 == 1;
    const int64_t floats = ops::conv2dScratch(c.x, c.w, c.p, chunked ? 1 : 0);
    auto scratch = shiftedPoisoned(ctx(), {floats}, DType::F32);

    vk::Recorder rec(ctx());
    const ops::TensorView* b = c.bias ? &tb.view : nullptr;
    ops::conv2d(rec, tx.view, tw.view, b, ty.view, scratch.view, c.p);
    ops::conv2dDirect(rec, tx.view, tw.view, b, tyd.view, c.p);
    ops::conv2dBackward(rec, tx.view, tw.view, tdy.view, {&tdx.view, &tdw.view, &tdb.view},
                        scratch.view, c.p);
    ops::conv2dBackward(
        rec, tx.view, tw.view, tdy.view,
        {&adx.view, &adw.view, &adb.view, Write::Accumulate, Write::Accumulate, Write::Accumulate},
        scratch.view, c.p);
    rec.submit();
    EXPECT_TRUE(allClose(downloadShifted(ctx(), ty), want, 1e-5)) << "y";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tyd), want, 1e-5)) << "y, direct";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tdx), g.dx, 1e-5)) << "dx";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tdw), g.dw, 1e-5)) << "dw";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tdb), g.dbias, 1e-5)) << "dbias";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), adx), added(g.dx, init_dx), 1e-5)) << "dx +=";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), adw), added(g.dw, init_dw), 1e-5)) << "dw +=";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), adb), added(g.dbias, init_db), 1e-5)) << "db +=";
  }
}

// Activations (x, y, dy, dx) in f16 and bf16: the kernels read them into f32 and round each
// output once, so closeInFormat against the reference on the rounded inputs.
TEST_F(Conv2dTest, SixteenBitActivations) {
  SCOPED_TRACE(rng_.describe());
  const Case& c = kCases[5];
  const Shape ys = ops::conv2dShape(c.x, c.w, nullptr, c.p);
  for (DType dt : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dt));
    const auto x = ops::ref::roundTo(dt, rng_.normal(size_t(c.x.numel())));
    const auto dy = ops::ref::roundTo(dt, rng_.normal(size_t(ys.numel())));
    const auto w = rng_.normal(size_t(c.w.numel())), bias = rng_.normal(size_t(c.w[0]));
    const auto want = ops::ref::conv2d(x, c.x, w, c.w, bias, c.p);
    const auto g = ops::ref::conv2dBackward(x, c.x, w, c.w, dy, c.p);
    auto tx = shiftedUpload(ctx(), c.x, x, dt), tdy = shiftedUpload(ctx(), ys, dy, dt);
    auto tw = upload(ctx(), c.w, w), tb = upload(ctx(), {c.w[0]}, bias);
    auto ty = shiftedPoisoned(ctx(), ys, dt), tdx = shiftedPoisoned(ctx(), c.x, dt);
    auto tdw = poisoned(ctx(), c.w), tdb = poisoned(ctx(), {c.w[0]});
    auto scratch = poisoned(ctx(), {ops::conv2dScratch(c.x, c.w, c.p)});
    vk::Recorder rec(ctx());
    const ops::TensorView b = tb.view(), dw = tdw.view(), db = tdb.view();
    ops::conv2d(rec, tx.view, tw.view(), &b, ty.view, scratch.view(), c.p);
    ops::conv2dBackward(rec, tx.view, tw.view(), tdy.view, {&tdx.view, &dw, &db}, scratch.view(),
                        c.p);
    rec.submit();
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ty), want, dt, 1e-5)) << "y";
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tdx), g.dx, dt, 1e-5)) << "dx";
    EXPECT_TRUE(allClose(download(ctx(), tdw), g.dw, 1e-5)) << "dw";
    EXPECT_TRUE(allClose(download(ctx(), tdb), g.dbias, 1e-5)) << "dbias";
  }
}

TEST_F(Conv2dTest, RejectsBadShapesBeforeRecording) {
  auto x = poisoned(ctx(), {2, 4, 8, 8}), w = poisoned(ctx(), {6, 2, 3, 3});
  auto y = poisoned(ctx(), {2, 6, 6, 6}), s = poisoned(ctx(), {1});
  const Conv2dParams two = Conv2dParams::square(1, 0, 1, 2);
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::conv2d(rec, x.view(), w.view(), nullptr, y.view(), s.view(), {}); },
      "conv2d: x (2,4,8,8) w (6,2,3,3) stride 1x1 pad 0,0,0,0 dilation 1x1 groups 1: w's "
      "second dim must be C/groups = 4");
  expectShapeError(
      rec,
      [&] {
        ops::conv2d(rec, x.view(), w.view(), nullptr, y.view(), s.view(),
                    Conv2dParams::square(1, 0, 1, 3));
      },
      "groups must divide the input and output channels");
  expectShapeError(
      rec,
      [&] {
        ops::conv2d(rec, x.view(), w.view(), nullptr, y.view(), s.view(),
                    Conv2dParams::square(1, 0, 4, 2));
      },
      "the dilated kernel is larger than the padded input");
  expectShapeError(
      rec, [&] { ops::conv2d(rec, x.view(), w.view(), nullptr, y.view(), s.view(), two); },
      "scratch (1) must hold at least");
  expectShapeError(
      rec,
      [&] {
        ops::conv2d(rec, x.view(), w.view(), nullptr, ops::view(y.buffer, {2, 6, 6, 5}), s.view(),
                    two);
      },
      "y/dy (2,6,6,5) must be (2,6,6,6)");
  const ops::TensorView bad_bias = ops::view(s.buffer, {1});
  expectShapeError(
      rec, [&] { ops::conv2d(rec, x.view(), w.view(), &bad_bias, y.view(), s.view(), two); },
      "bias (1) must be (6)");
  expectShapeError(
      rec,
      [&] {
        ops::conv2d(rec, x.view(), w.view(), nullptr, y.view(), s.view(),
                    Conv2dParams::square(0, 0, 1, 2));
      },
      "strides, dilations and groups must be at least 1");
}

}  // namespace
}  // namespace vkgrad::test
