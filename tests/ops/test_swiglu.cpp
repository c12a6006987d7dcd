// ops::swiglu and swigluBackward against the double-precision CPU reference on odd shapes:
// two tensors and the fused gate_up, f32 and 16-bit, write modes, one output alone; errors.
#include "vkgrad/ops/swiglu.h"

#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/swiglu.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;

// One sigmoid (common/ew_math.glsl's exp, 1e-7 relative) and two or three products per
// element: a few ulp. Seen on lavapipe: below 3e-7 of the largest output.
constexpr double kTolerance = 1e-6;

struct Want {
  std::vector<float> y, dgate, dup;
};
Want reference(const std::vector<float>& gate, const std::vector<float>& up,
               const std::vector<float>& dy) {
  const int64_t n = int64_t(gate.size());
  Want w{std::vector<float>(gate.size()), std::vector<float>(gate.size()),
         std::vector<float>(gate.size())};
  ops::ref::swiglu(gate.data(), up.data(), w.y.data(), n);
  ops::ref::swigluBackward(gate.data(), up.data(), dy.data(), w.dgate.data(), w.dup.data(), n);
  return w;
}

// (rows, 2F) from gate and up (rows, F): side by side in each row.
std::vector<float> sideBySide(const std::vector<float>& a, const std::vector<float>& b, int64_t f) {
  std::vector<float> out;
  for (size_t r = 0; r < a.size() / size_t(f); ++r) {
    out.insert(out.end(), a.begin() + r * f, a.begin() + (r + 1) * f);
    out.insert(out.end(), b.begin() + r * f, b.begin() + (r + 1) * f);
  }
  return out;
}

class SwigluTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(SwigluTest, MatchesCpuOnOddShapes) {
  SCOPED_TRACE(rng_.describe());
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    for (const Shape& shape : {Shape{1}, Shape{3, 7}, Shape{2, 5, 33}, Shape{70, 129}}) {
      SCOPED_TRACE(testing::Message() << ops::dtypeName(dtype) << " " << shape.str());
      const size_t n = size_t(shape.numel());
      // Gates out to |8|: both tails of the sigmoid.
      const auto gate = ops::ref::roundTo(dtype, rng_.uniform(n, -8.0f, 8.0f));
      const auto up = ops::ref::roundTo(dtype, rng_.normal(n));
      const auto dy = ops::ref::roundTo(dtype, rng_.normal(n));
      const Want want = reference(gate, up, dy);
      auto dg = upload(ctx(), shape, gate, dtype), du = upload(ctx(), shape, up, dtype);
      auto ddy = upload(ctx(), shape, dy, dtype), y = poisoned(ctx(), shape, dtype);
      auto dgate = poisoned(ctx(), shape, dtype), dup = poisoned(ctx(), shape, dtype);
      vk::Recorder rec(ctx());
      ops::swiglu(rec, dg.view(), du.view(), y.view());
      ops::swigluBackward(rec, dg.view(), du.view(), ddy.view(), dgate.view(), dup.view());
      rec.submit();
      EXPECT_TRUE(closeInFormat(download(ctx(), y), want.y, dtype, kTolerance)) << "y";
      EXPECT_TRUE(closeInFormat(download(ctx(), dgate), want.dgate, dtype, kTolerance)) << "dgate";
      EXPECT_TRUE(closeInFormat(download(ctx(), dup), want.dup, dtype, kTolerance)) << "dup";
    }
}

TEST_F(SwigluTest, FusedGateUpMatchesTwoTensors) {
  SCOPED_TRACE(rng_.describe());
  for (const Shape& shape : {Shape{1, 1}, Shape{2, 3, 17}, Shape{33, 65}}) {
    SCOPED_TRACE(shape.str());
    const int64_t f = shape.back();
    const size_t n = size_t(shape.numel());
    const auto gate = rng_.uniform(n, -6.0f, 6.0f), up = rng_.normal(n), dy = rng_.normal(n);
    const Want want = reference(gate, up, dy);
    const Shape fused_shape =
        shape.rank() == 2 ? Shape{shape[0], 2 * f} : Shape{shape[0], shape[1], 2 * f};
    const std::vector<float> d0 = rng_.normal(2 * n);  // dgate_up's earlier contents
    auto gu = upload(ctx(), fused_shape, sideBySide(gate, up, f));
    auto ddy = upload(ctx(), shape, dy), y = poisoned(ctx(), shape);
    auto dgu = poisoned(ctx(), fused_shape), acc = upload(ctx(), fused_shape, d0);
    vk::Recorder rec(ctx());
    ops::swiglu(rec, gu.view(), y.view());
    ops::swigluBackward(rec, gu.view(), ddy.view(), dgu.view());
    ops::swigluBackward(rec, gu.view(), ddy.view(), acc.view(), ops::Write::Accumulate);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), y), want.y, kTolerance)) << "y";
    const auto grad = sideBySide(want.dgate, want.dup, f);
    EXPECT_TRUE(allClose(download(ctx(), dgu), grad, kTolerance)) << "dgate_up";
    std::vector<float> summed(grad);
    for (size_t i = 0; i < summed.size(); ++i) summed[i] += d0[i];
    EXPECT_TRUE(allClose(download(ctx(), acc), summed, kTolerance)) << "dgate_up accumulated";
  }
}

TEST_F(SwigluTest, OneGradientAloneAndAccumulated) {
  SCOPED_TRACE(rng_.describe());
  const Shape shape{5, 9};
  const size_t n = 45;
  const auto gate = rng_.uniform(n, -4.0f, 4.0f), up = rng_.normal(n), dy = rng_.normal(n);
  const auto d0 = rng_.normal(n);
  const Want want = reference(gate, up, dy);
  auto dg = upload(ctx(), shape, gate), du = upload(ctx(), shape, up),
       ddy = upload(ctx(), shape, dy);
  auto dgate = upload(ctx(), shape, d0), dup = poisoned(ctx(), shape);
  vk::Recorder rec(ctx());
  ops::swigluBackward(rec, dg.view(), du.view(), ddy.view(), dgate.view(), {},
                      ops::Write::Accumulate);
  ops::swigluBackward(rec, dg.view(), du.view(), ddy.view(), {}, dup.view());
  rec.submit();
  std::vector<float> summed(want.dgate);
  for (size_t i = 0; i < n; ++i) summed[i] += d0[i];
  EXPECT_TRUE(allClose(download(ctx(), dgate), summed, kTolerance)) << "dgate";
  EXPECT_TRUE(allClose(download(ctx(), dup), want.dup, kTolerance)) << "dup";
}

TEST_F(SwigluTest, RefusesBadShapesBeforeRecording) {
  auto a = poisoned(ctx(), {4, 7}), b = poisoned(ctx(), {4, 8}), y = poisoned(ctx(), {4, 7});
  auto odd = poisoned(ctx(), {4, 7}), half = poisoned(ctx(), {4, 4});
  vk::Recorder rec(ctx());
  EXPECT_THROW(ops::swiglu(rec, a.view(), b.view(), y.view()), ShapeError);
  EXPECT_THROW(ops::swiglu(rec, odd.view(), y.view()), ShapeError);  // 2F odd
  EXPECT_THROW(ops::swiglu(rec, b.view(), y.view()), ShapeError);    // y is not (4,4)
  EXPECT_THROW(ops::swigluBackward(rec, b.view(), half.view(), b.view()), ShapeError);  // alias
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
