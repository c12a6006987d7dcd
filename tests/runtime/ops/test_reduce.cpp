// The graph's reductions (engine/vkgrad/runtime/ops/reduce.cpp) and expand (expand.cpp): sum,
// mean and max over sets of axes, kept or dropped, and broadcast_to, forward against the CPU
// reference and gradients against finite differences.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/map_reduce.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphReduceTest : public VkTest {
 protected:
  Rng rng_;
};

// A maximum's finite difference would straddle a tie between close elements, so max runs on
// x + spread: every element 3 apart from every other (x in [-1, 1]).
TEST_F(GraphReduceTest, SumMeanAndMaxOverAxesWithGradients) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{3, 4, 5, 2};
  std::vector<float> spread(size_t(x.numel()));
  for (size_t i = 0; i < spread.size(); ++i) spread[i] = 3.0f * float((i * 37) % spread.size());
  struct Case {
    std::vector<int> axes;
    uint32_t mask;
    bool keep;
  };
  const Case cases[] = {{{1}, 0b0010, false}, {{0, -1}, 0b1001, true}, {{}, 0b1111, false}};
  for (const Case& c : cases)
    for (int kind = 0; kind < 3; ++kind) {
      SCOPED_TRACE(testing::Message() << "kind " << kind << " mask " << c.mask);
      const double count = double(x.numel()) / double(ops::reducedShape(x, c.mask, false).numel());
      EXPECT_TRUE(checkGraphOp(
          ctx(), rng_, {{x}},
          [&](Graph& g, const std::vector<Tensor>& t) {
            const Tensor y =
                kind == 0   ? g.sum(t[0], c.axes, c.keep)
                : kind == 1 ? g.mean(t[0], c.axes, c.keep)
                            : g.max(g.add(t[0], g.constant("spread", x, spread)), c.axes, c.keep);
            EXPECT_EQ(g.shape(y), ops::reducedShape(x, c.mask, c.keep));
            return y;
          },
          [&](const Values& v) {
            auto in = v[0];
            if (kind == 2)
              for (size_t i = 0; i < in.size(); ++i) in[i] += spread[i];
            return ops::ref::mapReduce(ops::MapFn::X, kind == 2 ? ops::Fold::Max : ops::Fold::Sum,
                                       {in.data()}, {x}, x, c.mask,
                                       kind == 1 ? float(1 / count) : 1.0f);
          }));
    }
}

// Folds past 1024 elements run in parts through a scratch tensor of the node's own: the sum
// over 2,100 rows forward, and the gradient of b, broadcast over (2100, 2, 3) from (2, 1),
// folding 6,300 elements backward (both operands broadcast: the general kernel).
TEST_F(GraphReduceTest, LongFoldsForwardAndBackward) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{2100, 1, 3}, bias{2, 1}, space{2100, 2, 3};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}, {bias}},
      [&](Graph& g, const std::vector<Tensor>& t) { return g.sum(g.add(t[0], t[1]), {0}); },
      [&](const Values& v) {
        return ops::ref::mapReduce(ops::MapFn::Add, ops::Fold::Sum, {v[0].data(), v[1].data()},
                                   {x, bias}, space, 0b001);
      }));
}

TEST_F(GraphReduceTest, ExpandRepeatsAndItsGradientSums) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{3, 1, 5}, to{2, 3, 4, 5};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}},
      [&](Graph& g, const std::vector<Tensor>& t) { return g.expand(t[0], to); },
      [&](const Values& v) {
        return ops::ref::mapReduce(ops::MapFn::X, ops::Fold::Sum, {v[0].data()}, {x}, to, 0);
      },
      0.0));
}

TEST(GraphReduceShapeTest, BadAxesAreNamed) {
  Graph g;
  const Tensor x = g.input("x", {3, 4});
  EXPECT_THROW(g.sum(x, {2}), ShapeError);
  EXPECT_THROW(g.mean(x, {0, -2}), ShapeError);  // the same axis twice
  EXPECT_THROW(g.expand(x, {3, 5}), ShapeError);
  EXPECT_EQ(g.shape(g.max(x, {-1}, true)), (Shape{3, 1}));
  EXPECT_EQ(g.shape(g.sum(x)), (Shape{1}));
}

}  // namespace
}  // namespace vkgrad::test
