// The graph's where op (engine/vkgrad/runtime/ops/where.cpp): cond ? a : b with all three
// broadcast, forward against the CPU reference and both gradients against finite differences.
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

class GraphWhereTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(GraphWhereTest, PicksByTheConditionWithGradients) {
  SCOPED_TRACE(rng_.describe());
  const Shape cond{4, 1}, a{3, 1, 5}, b{5}, space{3, 4, 5};
  WordInput mask{cond, rng_.below(4, 2)};
  mask.values[0] = 0, mask.values[1] = 1;  // both branches taken
  const std::vector<float> mask_f(mask.values.begin(), mask.values.end());
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{a}, {b}},
      [&](Graph& g, const std::vector<Tensor>& t) { return g.where(t[2], t[0], t[1]); },
      [&](const Values& v) {
        return ops::ref::mapReduce(ops::MapFn::Where, ops::Fold::Sum,
                                   {mask_f.data(), v[0].data(), v[1].data()}, {cond, a, b}, space,
                                   0);
      },
      0.0, {mask}));
}

TEST(GraphWhereShapeTest, TheConditionIsU32) {
  Graph g;
  const Tensor a = g.input("a", {3, 4});
  EXPECT_THROW(g.where(g.input("c", {3, 4}), a, a), ShapeError);
  EXPECT_THROW(g.where(g.input("c", {2, 4}, ops::DType::U32), a, a), ShapeError);
  EXPECT_EQ(g.shape(g.where(g.input("c", {4}, ops::DType::U32), a, g.input("s", {1}))),
            (Shape{3, 4}));
}

}  // namespace
}  // namespace vkgrad::test
