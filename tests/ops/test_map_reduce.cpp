// ops::mapReduce (engine/vkgrad/ops/map_reduce.h) against its CPU reference: every element
// function on operands broadcast on both sides, sums and maxima over sets of axes, up to rank
// 6, accumulation, 16-bit storage, and the shape errors.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/map_reduce.h"

namespace vkgrad::test {
namespace {

using ops::Fold;
using ops::MapFn;
using ops::Shape;

class MapReduceTest : public VkTest {
 protected:
  Rng rng_;
  // Values away from 0 for divisors, so the quotients stay well conditioned.
  std::vector<float> valuesFor(const Shape& s, bool divisor = false) {
    auto v = rng_.uniform(size_t(s.numel()), -2.0f, 2.0f);
    if (divisor)
      for (float& x : v) x = x < 0 ? x - 0.5f : x + 0.5f;
    return v;
  }
  std::vector<float> mask(const Shape& s) {
    std::vector<float> m(size_t(s.numel()));
    for (float& x : m) x = float(rng_.below(2));
    return m;
  }
  DeviceTensor uploadMask(const std::vector<float>& m, const Shape& s) {
    std::vector<uint32_t> words(m.begin(), m.end());
    return {uploadWords(ctx(), words), s, ops::DType::U32};
  }
  // Runs fn over space (inputs uploaded as given; a condition first for the masked kinds)
  // and checks the result against the reference, overwriting and then accumulating.
  void check(MapFn fn, Fold fold, const std::vector<Shape>& shapes, const Shape& space,
             uint32_t axes, float alpha, double tolerance) {
    SCOPED_TRACE(testing::Message()
                 << ops::mapFnName(fn) << " over " << space.str() << " axes " << axes);
    const bool cond = fn == MapFn::Where || fn == MapFn::MaskTrue || fn == MapFn::MaskFalse;
    std::vector<std::vector<float>> host;
    std::vector<DeviceTensor> dev;
    for (size_t t = 0; t < shapes.size(); ++t) {
      if (t == 0 && cond) {
        host.push_back(mask(shapes[t]));
        dev.push_back(uploadMask(host.back(), shapes[t]));
      } else {
        host.push_back(valuesFor(
            shapes[t], (fn == MapFn::Div && t == 1) || (fn == MapFn::DivGradB && t == 2)));
        dev.push_back(upload(ctx(), shapes[t], host.back()));
      }
    }
    // SelectEqual must meet equal elements: its second operand copies the first where it can.
    if (fn == MapFn::SelectEqual && shapes[0] == shapes[1]) {
      for (size_t i = 0; i < host[0].size(); i += 2) host[1][i] = host[0][i];
      dev[1] = upload(ctx(), shapes[1], host[1]);
    }
    std::vector<const float*> ptrs;
    std::vector<ops::TensorView> views;
    for (size_t t = 0; t < shapes.size(); ++t)
      ptrs.push_back(host[t].data()), views.push_back(dev[t].view());
    const auto want = ops::ref::mapReduce(fn, fold, ptrs, shapes, space, axes, alpha);
    const Shape out_shape = ops::reducedShape(space, axes, true);
    auto out = poisoned(ctx(), out_shape);
    const auto init = rng_.uniform(want.size());
    auto acc = upload(ctx(), out_shape, init);
    // A long fold's partial results (none where each output folds 1024 elements or fewer).
    const int64_t n_scratch = ops::mapReduceScratch(space, axes);
    auto scratch = poisoned(ctx(), {std::max<int64_t>(n_scratch, 1)});
    vk::Recorder rec(ctx());
    ops::mapReduce(rec, fn, fold, views, space, axes, out.view(), alpha, ops::Write::Overwrite,
                   scratch.view());
    ops::mapReduce(rec, fn, fold, views, space, axes, acc.view(), alpha, ops::Write::Accumulate,
                   scratch.view());
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), out), want, tolerance));
    auto want_acc = want;
    for (size_t i = 0; i < want.size(); ++i) want_acc[i] += init[i];
    EXPECT_TRUE(allClose(download(ctx(), acc), want_acc, tolerance));
  }
};

// Both operands broadcast, to ranks 1 to 6. f32 arithmetic, one rounding: 1e-6.
TEST_F(MapReduceTest, BinaryFunctionsBroadcastOnBothSides) {
  SCOPED_TRACE(rng_.describe());
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{7}, {7}},
                        {{5}, {1}},
                        {{3, 1, 5}, {4, 1}},
                        {{1, 9}, {6, 1}},
                        {{2, 3, 1, 5}, {3, 4, 1}},
                        {{2, 1, 3, 1, 5}, {7, 1, 4, 5}},
                        {{1, 2, 1, 3, 1, 5}, {3, 1, 2, 3, 4, 1}}};
  for (MapFn fn : {MapFn::Add, MapFn::Sub, MapFn::Mul, MapFn::Div, MapFn::Max, MapFn::Min})
    for (const Case& c : cases)
      check(fn, Fold::Sum, {c.a, c.b}, ops::broadcastShape("test", c.a, c.b), 0, 1.0f, 1e-6);
}

TEST_F(MapReduceTest, WhereAndMasksPickByACondition) {
  SCOPED_TRACE(rng_.describe());
  const Shape space{3, 4, 5};
  check(MapFn::Where, Fold::Sum, {{4, 1}, {3, 1, 5}, {5}}, space, 0, 1.0f, 0.0);
  check(MapFn::Where, Fold::Sum, {space, space, space}, space, 0, 1.0f, 0.0);
  check(MapFn::MaskTrue, Fold::Sum, {{4, 5}, space}, space, 0b101, 1.0f, 1e-6);
  check(MapFn::MaskFalse, Fold::Sum, {{3, 1, 1}, space}, space, 0b010, 1.0f, 1e-6);
}

// Sums (Kahan-compensated: 1e-6 even over 2,000 terms) and maxima (exact) over sets of axes.
TEST_F(MapReduceTest, FoldsOverAnySetOfAxes) {
  SCOPED_TRACE(rng_.describe());
  const Shape space{3, 4, 5, 7};
  for (uint32_t axes : {0b0001u, 0b0010u, 0b1000u, 0b0101u, 0b1010u, 0b1110u, 0b1111u}) {
    check(MapFn::X, Fold::Sum, {space}, space, axes, 0.37f, 1e-6);
    check(MapFn::X, Fold::Max, {space}, space, axes, 1.0f, 0.0);
  }
  const Shape six{2, 3, 1, 4, 3, 5};
  check(MapFn::X, Fold::Sum, {six}, six, 0b101001, 1.0f, 1e-6);
  check(MapFn::X, Fold::Sum, {{2000}}, {2000}, 1, 1.0f, 1e-6);
}

// Folds longer than one invocation's 1024 elements run in parts whose partial results are
// folded again (twice past 1024 * 1024): one output of 70,001 elements (on lavapipe, whose
// invocations end after 65,535 loop iterations, it once came out -478.2 against -426.5),
// columns, a maximum, a broadcast operand's gradient over most of its space, three levels,
// and 20,480 outputs of 1024 elements each over six alternating axes, where lanes that took
// ten outputs each once ran past that budget. Sums of uniform [-2, 2]: Kahan-compensated in
// every part, 1e-6 of the largest.
TEST_F(MapReduceTest, LongFoldsRunInParts) {
  SCOPED_TRACE(rng_.describe());
  EXPECT_EQ(ops::mapReduceScratch({1024}, 1), 0);
  EXPECT_EQ(ops::mapReduceScratch({70001}, 1), 69);
  EXPECT_EQ(ops::mapReduceScratch({2, 1100000}, 0b10), 2 * 1075 + 2 * 2);
  check(MapFn::X, Fold::Sum, {{70001}}, {70001}, 1, 1.0f, 1e-6);
  check(MapFn::X, Fold::Sum, {{3001, 7}}, {3001, 7}, 0b01, 0.5f, 1e-6);
  check(MapFn::X, Fold::Max, {{5, 2100}}, {5, 2100}, 0b10, 1.0f, 0.0);
  check(MapFn::Mul, Fold::Sum, {{6, 3, 333}, {3, 1}}, {6, 3, 333}, 0b101, 1.0f, 1e-6);
  check(MapFn::X, Fold::Sum, {{2, 1100000}}, {2, 1100000}, 0b10, 1.0f, 1e-6);
}

TEST_F(MapReduceTest, ManyOutputsOverSixAlternatingAxes) {
  SCOPED_TRACE(rng_.describe());
  const Shape space{16, 32, 8, 20, 8, 32};
  check(MapFn::X, Fold::Sum, {space}, space, 0b010101, 1.0f, 1e-6);
}

// Without the scratch a long fold needs, or with one on top of its input, nothing is recorded.
TEST_F(MapReduceTest, LongFoldsNeedTheirScratch) {
  auto x = poisoned(ctx(), {3000}), out = poisoned(ctx(), {1}), small = poisoned(ctx(), {2});
  vk::Recorder rec(ctx());
  try {
    ops::reduce(rec, Fold::Sum, x.view(), 1, out.view());
    FAIL() << "a fold of 3000 elements ran without its scratch";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("needs a scratch of 3 f32"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::reduce(rec, Fold::Sum, x.view(), 1, out.view(), 1.0f, ops::Write::Overwrite,
                           small.view()),
               ShapeError);
  const ops::TensorView on_x = ops::view(x.buffer, {3});
  EXPECT_THROW(
      ops::reduce(rec, Fold::Sum, x.view(), 1, out.view(), 1.0f, ops::Write::Overwrite, on_x),
      ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

// The gradient forms: a broadcast operand's gradient folds the products over its broadcast axes.
TEST_F(MapReduceTest, GradientFormsFoldProducts) {
  SCOPED_TRACE(rng_.describe());
  const Shape space{4, 3, 5};
  // Sums of 12 to 20 f32 products in the kernel's order (which follows the device's workgroup
  // and subgroup limits) against an f64 reference: up to ~n * 2^-24 of the scale, 3e-6.
  check(MapFn::Mul, Fold::Sum, {space, {3, 1}}, space, 0b101, 1.0f, 3e-6);
  check(MapFn::Div, Fold::Sum, {space, {5}}, space, 0b011, 1.0f, 3e-6);
  check(MapFn::DivGradB, Fold::Sum, {space, space, {4, 1, 1}}, space, 0b110, 1.0f, 3e-6);
  check(MapFn::SelectEqual, Fold::Sum, {space, space, {4, 3, 1}}, space, 0, 1.0f, 0.0);
}

// Every tensor in f16 or bf16: the reference runs on the stored values, the result rounds
// once into its format.
TEST_F(MapReduceTest, SixteenBitTensors) {
  SCOPED_TRACE(rng_.describe());
  for (ops::DType dtype : {ops::DType::F16, ops::DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const Shape a_shape{3, 1, 5}, b_shape{4, 1}, space{3, 4, 5};
    const auto a = ops::ref::roundTo(dtype, valuesFor(a_shape));
    const auto b = ops::ref::roundTo(dtype, valuesFor(b_shape));
    const auto want = ops::ref::mapReduce(MapFn::Mul, Fold::Sum, {a.data(), b.data()},
                                          {a_shape, b_shape}, space, 0b001);
    auto ta = upload(ctx(), a_shape, a, dtype), tb = upload(ctx(), b_shape, b, dtype);
    auto out = poisoned(ctx(), {4, 5}, dtype);
    vk::Recorder rec(ctx());
    const ops::TensorView in[] = {ta.view(), tb.view()};
    ops::mapReduce(rec, MapFn::Mul, Fold::Sum, in, space, 0b001, out.view());
    rec.submit();
    EXPECT_TRUE(closeInFormat(download(ctx(), out), want, dtype, 1e-6));
  }
}

TEST_F(MapReduceTest, BadShapesAreNamedBeforeRecording) {
  auto a = poisoned(ctx(), {3, 4}), b = poisoned(ctx(), {5}), out = poisoned(ctx(), {3, 4});
  vk::Recorder rec(ctx());
  try {
    ops::binary(rec, MapFn::Add, a.view(), b.view(), out.view());
    FAIL() << "(3,4) + (5) was accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("(3,4) and (5) do not broadcast"), std::string::npos)
        << e.what();
  }
  auto small = poisoned(ctx(), {3});
  EXPECT_THROW(ops::reduce(rec, Fold::Sum, a.view(), 0b01, small.view()), ShapeError);
  EXPECT_THROW(ops::reduce(rec, Fold::Sum, a.view(), 0b100, out.view()), ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
