// ops::rope against the CPU reference (the same f32 angle, cosine, sine and rotation in
// double) on odd shapes, with the offset from a position buffer, far positions, 16-bit
// tensors, the inverse rotation, accumulation, in place; inv_freq; shape errors.
#include "vkgrad/ops/rope.h"

#include <cmath>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/rope.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;

// The kernel's cosine and sine are within ~1e-7 of the true values of the f32 angle (reduced
// in four parts, Taylor polynomials: shaders/rope/rope.comp) and the rotation adds an ulp or
// two: errors seen on lavapipe are below 3e-7 of the largest output, at positions up to 131k.
constexpr double kTolerance = 1e-6;

struct RopeRun {
  Shape shape;
  float theta = 10000.0f;
  int64_t offset = -1;  // -1: no position buffer (offset 0)
  bool inverse = false;
  DType dtype = DType::F32;
};

std::vector<float> runRope(vk::Context& ctx, const RopeRun& r, const std::vector<float>& x) {
  const std::vector<float> inv = ops::ropeInvFreq(r.shape[3], r.theta);
  auto dx = upload(ctx, r.shape, x, r.dtype), dinv = upload(ctx, {r.shape[3] / 2}, inv);
  auto y = poisoned(ctx, r.shape, r.dtype);
  const std::vector<uint32_t> word{uint32_t(r.offset < 0 ? 0 : r.offset)};
  vk::Buffer pos = uploadWords(ctx, word);
  vk::Recorder rec(ctx);
  ops::rope(rec, dx.view(), dinv.view(),
            r.offset < 0 ? ops::TensorView{} : ops::view(pos, {1}, 0, DType::U32), y.view(),
            r.inverse);
  EXPECT_EQ(rec.dispatchCount(), 1u);
  rec.submit();
  return download(ctx, y);
}

std::vector<float> reference(const RopeRun& r, const std::vector<float>& x) {
  const std::vector<float> inv = ops::ropeInvFreq(r.shape[3], r.theta);
  std::vector<float> y(x.size());
  ops::ref::rope(x.data(), inv.data(), y.data(), r.shape[0], r.shape[1], r.shape[2], r.shape[3],
                 uint32_t(r.offset < 0 ? 0 : r.offset), r.inverse);
  return y;
}

class RopeTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(RopeTest, MatchesCpuOnOddShapes) {
  SCOPED_TRACE(rng_.describe());
  const RopeRun runs[] = {{{1, 1, 1, 2}},
                          {{2, 5, 3, 6}},
                          {{1, 7, 2, 130}, 500000.0f},
                          {{3, 4, 5, 64}, 10000.0f, 4093},
                          {{2, 3, 2, 18}, 1000000.0f, 0, true},
                          {{1, 9, 3, 10}, 10000.0f, 77, true}};
  for (const RopeRun& r : runs) {
    SCOPED_TRACE(testing::Message() << r.shape.str() << " theta " << r.theta << " offset "
                                    << r.offset << (r.inverse ? " inverse" : ""));
    const std::vector<float> x = rng_.normal(size_t(r.shape.numel()));
    EXPECT_TRUE(allClose(runRope(ctx(), r, x), reference(r, x), kTolerance));
  }
}

TEST_F(RopeTest, RotatesOnlyTheFirstHeads) {
  SCOPED_TRACE(rng_.describe());
  // A fused q, k, v row viewed as (B,T,Hq+2Hkv,D): 3 query and 1 key head turn, 1 value head
  // is copied; forward and inverse, with a device position.
  const Shape s{2, 3, 5, 8};
  const std::vector<float> x = rng_.normal(size_t(s.numel()));
  const std::vector<float> inv = ops::ropeInvFreq(8, 10000.0f);
  auto dx = upload(ctx(), s, x), dinv = upload(ctx(), {4}, inv);
  auto y = poisoned(ctx(), s), back = poisoned(ctx(), s);
  const std::vector<uint32_t> word{11};
  vk::Buffer pos = uploadWords(ctx(), word);
  const ops::TensorView position = ops::view(pos, {1}, 0, DType::U32);
  vk::Recorder rec(ctx());
  ops::rope(rec, dx.view(), dinv.view(), position, y.view(), false, ops::Write::Overwrite, 4);
  ops::rope(rec, dx.view(), dinv.view(), position, back.view(), true, ops::Write::Overwrite, 4);
  rec.submit();
  for (bool inverse : {false, true}) {
    std::vector<float> want(x.size());
    ops::ref::rope(x.data(), inv.data(), want.data(), 2, 3, 5, 8, 11, inverse, 4);
    EXPECT_TRUE(allClose(download(ctx(), inverse ? back : y), want, kTolerance)) << inverse;
  }
}

TEST_F(RopeTest, FarPositionsKeepTheirPrecision) {
  SCOPED_TRACE(rng_.describe());
  // Angles up to 1.3e5 rad at the lowest frequency (inv_freq[0] = 1): a 128k context.
  for (int64_t offset : {32767, 131000}) {
    SCOPED_TRACE(offset);
    const RopeRun r{{1, 3, 2, 128}, 10000.0f, offset};
    const std::vector<float> x = rng_.normal(size_t(r.shape.numel()));
    EXPECT_TRUE(allClose(runRope(ctx(), r, x), reference(r, x), kTolerance));
  }
}

TEST_F(RopeTest, SixteenBitTensors) {
  SCOPED_TRACE(rng_.describe());
  for (DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const RopeRun r{{2, 5, 3, 34}, 10000.0f, 9, false, dtype};
    const std::vector<float> x = ops::ref::roundTo(dtype, rng_.normal(size_t(r.shape.numel())));
    EXPECT_TRUE(closeInFormat(runRope(ctx(), r, x), reference(r, x), dtype, kTolerance));
  }
}

TEST_F(RopeTest, AccumulatesAndRunsInPlace) {
  SCOPED_TRACE(rng_.describe());
  const RopeRun r{{2, 3, 3, 12}, 10000.0f, 5, true};
  const std::vector<float> dy = rng_.normal(size_t(r.shape.numel()));
  const std::vector<float> dx0 = rng_.normal(dy.size());
  const std::vector<float> inv = ops::ropeInvFreq(12, r.theta);
  auto ddy = upload(ctx(), r.shape, dy), ddx = upload(ctx(), r.shape, dx0);
  auto dinv = upload(ctx(), {6}, inv), inplace = upload(ctx(), r.shape, dy);
  const std::vector<uint32_t> word{5};
  vk::Buffer pos = uploadWords(ctx(), word);
  const ops::TensorView position = ops::view(pos, {1}, 0, DType::U32);
  vk::Recorder rec(ctx());
  ops::rope(rec, ddy.view(), dinv.view(), position, ddx.view(), true, ops::Write::Accumulate);
  ops::rope(rec, inplace.view(), dinv.view(), position, inplace.view(), true);
  rec.submit();
  std::vector<float> want = reference(r, dy);
  EXPECT_TRUE(allClose(download(ctx(), inplace), want, kTolerance)) << "in place";
  for (size_t i = 0; i < want.size(); ++i) want[i] += dx0[i];
  EXPECT_TRUE(allClose(download(ctx(), ddx), want, kTolerance)) << "accumulated";
}

TEST_F(RopeTest, InvFreqIsTheCorrectlyRoundedF32Table) {
  const std::vector<float> inv = ops::ropeInvFreq(64, 10000.0f);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_EQ(inv[0], 1.0f);
  for (size_t i = 0; i < inv.size(); ++i) {
    const double exponent = double(float(2 * i) / 64.0f);  // f32, as torch.arange(...) / dim
    const double want = 1.0 / std::pow(10000.0, exponent);
    EXPECT_NEAR(inv[i], want, want * 2.4e-7) << i;  // the power and the division each round once
  }
}

TEST_F(RopeTest, RefusesBadShapesBeforeRecording) {
  auto x = poisoned(ctx(), {2, 3, 4, 5}), inv = poisoned(ctx(), {2});
  auto good = poisoned(ctx(), {2, 3, 4, 6}), good_inv = poisoned(ctx(), {3});
  auto flat = poisoned(ctx(), {6, 24});
  vk::Recorder rec(ctx());
  EXPECT_THROW(ops::rope(rec, x.view(), inv.view(), {}, x.view()), ShapeError);  // D odd
  EXPECT_THROW(ops::rope(rec, flat.view(), good_inv.view(), {}, flat.view()), ShapeError);
  EXPECT_THROW(ops::rope(rec, good.view(), inv.view(), {}, good.view()), ShapeError);    // inv_freq
  EXPECT_THROW(ops::rope(rec, good.view(), good_inv.view(), {}, x.view()), ShapeError);  // y
  EXPECT_THROW(
      ops::rope(rec, good.view(), good_inv.view(), {}, good.view(), true, ops::Write::Accumulate),
      ShapeError);  // accumulating in place
  EXPECT_THROW(ops::ropeInvFreq(6, 1.0f), ShapeError);
  for (int64_t rotated : {0, 5})  // heads 1..4
    EXPECT_THROW(ops::rope(rec, good.view(), good_inv.view(), {}, good.view(), false,
                           ops::Write::Overwrite, rotated),
                 ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
