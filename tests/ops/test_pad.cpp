#include "vkgrad/ops/pad.h"

#include <cmath>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/pad.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Padding;
using ops::PadMode;
using ops::Shape;
using ops::Write;

struct Case {
  Shape x;
  Padding padding;
};
// Odd sizes, every rank, unequal sides, zero sides, reflect amounts up to their axis - 1
// (where the two mirror images of one element meet) and a fill that is not 0.
const Case kCases[] = {
    {{2, 3, 5, 7}, {1, 2, 3, 0, PadMode::Constant, 0.0f}},
    {{2, 3, 5, 7}, {4, 1, 6, 2, PadMode::Reflect}},
    {{3, 4, 6}, {0, 3, 2, 2, PadMode::Constant, -1.5f}},
    {{3, 4, 6}, {3, 3, 1, 5, PadMode::Reflect}},
    {{9}, {0, 0, 4, 8, PadMode::Reflect}},
    {{9}, {0, 0, 2, 1, PadMode::Constant, 2.0f}},
    {{1, 2, 1, 1}, {1, 1, 1, 1, PadMode::Constant, 0.5f}},
    {{2, 2}, {1, 1, 1, 0, PadMode::Reflect}},
};

std::string describe(const Case& c) {
  return c.x.str() + (c.padding.mode == PadMode::Reflect ? " reflect " : " constant ") +
         std::to_string(c.padding.top) + "," + std::to_string(c.padding.bottom) + "," +
         std::to_string(c.padding.left) + "," + std::to_string(c.padding.right);
}

// x seen as (b, h, w).
struct Planes {
  int64_t b, h, w;
};
Planes planes(const Shape& x) {
  const int64_t h = x.rank() >= 2 ? x[x.rank() - 2] : 1;
  return {x.numel() / (h * x.back()), h, x.back()};
}

class PadTest : public VkTest {
 protected:
  Rng rng_;
};

// Forward and backward (overwrite and accumulate) against the reference, every view one
// element into its buffer. A copy is exact; the backward sums at most 9 values in f32 where
// the reference adds in double and rounds once.
TEST_F(PadTest, MatchesTheReferenceBothWays) {
  SCOPED_TRACE(rng_.describe());
  for (const Case& c : kCases) {
    SCOPED_TRACE(describe(c));
    const Shape ys = ops::padShape(c.x, c.padding);
    const Planes p = planes(c.x);
    const auto x = rng_.normal(size_t(c.x.numel())), dy = rng_.normal(size_t(ys.numel())),
               init = rng_.normal(size_t(c.x.numel()));
    std::vector<float> want(size_t(ys.numel())), want_dx(x.size()), want_acc = init;
    ops::ref::pad(x.data(), want.data(), p.b, p.h, p.w, c.padding);
    ops::ref::padBackward(dy.data(), want_dx.data(), p.b, p.h, p.w, c.padding, false);
    ops::ref::padBackward(dy.data(), want_acc.data(), p.b, p.h, p.w, c.padding, true);

    auto tx = shiftedUpload(ctx(), c.x, x, DType::F32);
    auto ty = shiftedPoisoned(ctx(), ys, DType::F32);
    auto tdy = shiftedUpload(ctx(), ys, dy, DType::F32);
    auto tdx = shiftedPoisoned(ctx(), c.x, DType::F32);
    auto tacc = shiftedUpload(ctx(), c.x, init, DType::F32);
    vk::Recorder rec(ctx());
    ops::pad(rec, tx.view, ty.view, c.padding);
    ops::padBackward(rec, tdy.view, tdx.view, c.padding);
    ops::padBackward(rec, tdy.view, tacc.view, c.padding, Write::Accumulate);
    EXPECT_EQ(rec.dispatchCount(), 3u);
    rec.submit();
    EXPECT_TRUE(allClose(downloadShifted(ctx(), ty), want, 0.0)) << "y";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tdx), want_dx, 1e-6)) << "dx";
    EXPECT_TRUE(allClose(downloadShifted(ctx(), tacc), want_acc, 1e-6)) << "dx accumulated";
  }
}

// loss = sum w * pad(x): the gradient is linear in w, so finite differences check the map
// (which outputs each input reaches) as much as the arithmetic.
TEST_F(PadTest, PassesGradCheck) {
  SCOPED_TRACE(rng_.describe());
  for (const Case& c : {kCases[1], kCases[3], kCases[2]}) {
    SCOPED_TRACE(describe(c));
    const Shape ys = ops::padShape(c.x, c.padding);
    std::vector<float> x = rng_.normal(size_t(c.x.numel()));
    const auto w = rng_.uniform(size_t(ys.numel()));
    auto forward = [&] {
      auto tx = upload(ctx(), c.x, x), ty = poisoned(ctx(), ys);
      vk::Recorder rec(ctx());
      ops::pad(rec, tx.view(), ty.view(), c.padding);
      rec.submit();
      return download(ctx(), ty);
    };
    auto tw = upload(ctx(), ys, w), tdx = poisoned(ctx(), c.x);
    vk::Recorder rec(ctx());
    ops::padBackward(rec, tw.view(), tdx.view(), c.padding);
    rec.submit();
    const auto dx = download(ctx(), tdx);
    EXPECT_TRUE(checkGradients([&] { return weightedSum(forward(), w); }, {{"x", &x, dx}}, rng_));
  }
}

// 16-bit x and y, or one of them f32: a copy rounds at most once, into y's format.
TEST_F(PadTest, SixteenBitTensorsMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  for (auto [xd, yd] : {std::pair{DType::F16, DType::F16}, std::pair{DType::BF16, DType::BF16},
                        std::pair{DType::F32, DType::BF16}}) {
    for (const Case& c : {kCases[1], kCases[2]}) {
      SCOPED_TRACE(describe(c) + " " + ops::dtypeName(xd) + " -> " + ops::dtypeName(yd));
      const Shape ys = ops::padShape(c.x, c.padding);
      const Planes p = planes(c.x);
      const auto x = ops::ref::roundTo(xd, rng_.normal(size_t(c.x.numel())));
      const auto dy = ops::ref::roundTo(yd, rng_.normal(size_t(ys.numel())));
      std::vector<float> want(size_t(ys.numel())), want_dx(x.size());
      ops::ref::pad(x.data(), want.data(), p.b, p.h, p.w, c.padding);
      ops::ref::padBackward(dy.data(), want_dx.data(), p.b, p.h, p.w, c.padding, false);
      auto tx = shiftedUpload(ctx(), c.x, x, xd), ty = shiftedPoisoned(ctx(), ys, yd);
      auto tdy = shiftedUpload(ctx(), ys, dy, yd), tdx = shiftedPoisoned(ctx(), c.x, xd);
      vk::Recorder rec(ctx());
      ops::pad(rec, tx.view, ty.view, c.padding);
      ops::padBackward(rec, tdy.view, tdx.view, c.padding);
      rec.submit();
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), ty), want, yd, 0.0)) << "y";
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), tdx), want_dx, xd, 1e-6)) << "dx";
    }
  }
}

TEST_F(PadTest, RefusesBadArgumentsBeforeRecording) {
  auto expectError = [](const Shape& x, const Padding& p, const std::string& text) {
    try {
      ops::padShape(x, p);
      ADD_FAILURE() << "accepted; expected \"" << text << "\"";
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expectError({2, 3, 4, 4}, {4, 0, 1, 1, PadMode::Reflect},
              "pad: x (2,3,4,4) with reflect (top 4, bottom 0, left 1, right 1): reflect amounts "
              "must be below their axis");
  expectError({5}, {1, 0, 0, 0, PadMode::Constant}, "rank-1 x pads only left and right");
  expectError({3, 3}, {0, -1, 0, 0, PadMode::Constant}, "amounts must be >= 0");
  expectError({3, 3}, {0, 0, 0, 1, PadMode::Constant, NAN}, "fill must be finite");
  EXPECT_EQ(ops::padShape({2, 3, 4, 5}, {1, 2, 3, 4, PadMode::Constant}), (Shape{2, 3, 7, 12}));

  auto x = poisoned(ctx(), {2, 3, 4}), y = poisoned(ctx(), {2, 3, 4});
  vk::Recorder rec(ctx());
  EXPECT_THROW(ops::pad(rec, x.view(), y.view(), {1, 0, 0, 0}), ShapeError);  // y too small
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
