// The graph's sliceAxis and split (engine/vkgrad/runtime/ops/slice_axis.cpp) and concat
// (concat.cpp): any axis, steps, Python's bounds, forward exact against a CPU copy and
// gradients (zeros where no slice reaches) against finite differences.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;
using ops::Shape;

class GraphSliceAxisTest : public VkTest {
 protected:
  Rng rng_;
};

// x[..., begin:end:step, ...] along axis, on the CPU.
std::vector<float> sliced(const std::vector<float>& x, const Shape& s, int axis, int64_t begin,
                          int64_t count, int64_t step) {
  int64_t dims[Shape::kMaxRank];
  for (int a = 0; a < s.rank(); ++a) dims[a] = a == axis ? count : s[a];
  const Shape out = Shape::of(dims, s.rank());
  std::vector<float> y(size_t(out.numel()));
  for (int64_t e = 0; e < out.numel(); ++e) {
    auto i = unflatIndex(out, e);
    i[size_t(axis)] = begin + i[size_t(axis)] * step;
    y[size_t(e)] = x[size_t(flatIndex(s, i))];
  }
  return y;
}

TEST_F(GraphSliceAxisTest, StepsAndNegativeBoundsWithGradients) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{3, 11, 5};
  // [1:9:3] on axis 1: rows 1, 4, 7; [-4:] on the last axis: 1..4; [0:3:2] on axis 0.
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}},
      [&](Graph& g, const std::vector<Tensor>& t) { return g.sliceAxis(t[0], 1, 1, 9, 3); },
      [&](const Values& v) { return sliced(v[0], x, 1, 1, 3, 3); }, 0.0));
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}},
      [&](Graph& g, const std::vector<Tensor>& t) { return g.sliceAxis(t[0], -1, -4, 100); },
      [&](const Values& v) { return sliced(v[0], x, 2, 1, 4, 1); }, 0.0));
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}},
      [&](Graph& g, const std::vector<Tensor>& t) { return g.sliceAxis(t[0], 0, 0, 3, 2); },
      [&](const Values& v) { return sliced(v[0], x, 0, 0, 2, 2); }, 0.0));
}

// split then concat in another order along the middle axis: a permutation of x's rows, every
// piece's gradient a slice of dout.
TEST_F(GraphSliceAxisTest, SplitAndConcatWithGradients) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{2, 7, 3};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}, {{2, 2, 3}}},
      [&](Graph& g, const std::vector<Tensor>& t) {
        const auto pieces = g.split(t[0], 1, {2, 4, 1});
        EXPECT_EQ(g.shape(pieces[1]), (Shape{2, 4, 3}));
        return g.concat({pieces[2], t[1], pieces[0], pieces[1]}, -2);
      },
      [&](const Values& v) {
        const Shape out{2, 9, 3};
        std::vector<float> y(size_t(out.numel()));
        const int64_t from[] = {6, -1, -1, 0, 1, 2, 3, 4, 5};  // x's row, or t[1]'s
        for (int64_t e = 0; e < out.numel(); ++e) {
          const auto i = unflatIndex(out, e);
          const int64_t row = from[i[1]];
          y[size_t(e)] = row >= 0 ? v[0][size_t(flatIndex(x, {i[0], row, i[2]}))]
                                  : v[1][size_t(flatIndex({2, 2, 3}, {i[0], i[1] - 1, i[2]}))];
        }
        return y;
      },
      0.0));
}

TEST(GraphSliceAxisShapeTest, BadSlicesAreNamed) {
  Graph g;
  const Tensor x = g.input("x", {3, 4});
  EXPECT_THROW(g.sliceAxis(x, 1, 2, 2), ShapeError);     // nothing
  EXPECT_THROW(g.sliceAxis(x, 1, 0, 4, 0), ShapeError);  // step 0
  EXPECT_THROW(g.sliceAxis(x, 2, 0, 1), ShapeError);     // no axis 2
  EXPECT_THROW(g.split(x, 1, {1, 2}), ShapeError);       // 3 of 4
  EXPECT_THROW(g.concat({x, g.input("y", {4, 4})}, 1), ShapeError);
  EXPECT_THROW(g.concat({x, g.input("u", {3, 4}, ops::DType::U32)}, 0), ShapeError);
  g.sliceAxis(x, 0, 1, 3);
  EXPECT_EQ(g.nodes().back().op, OpKind::Slice) << "a first-axis slice with step 1 is a view";
  EXPECT_EQ(g.shape(g.concat({x, g.input("z", {3, 2})}, 1)), (Shape{3, 6}));
}

}  // namespace
}  // namespace vkgrad::test
