// The graph's general binary ops (engine/vkgrad/runtime/ops/binary.cpp): add, sub, mul and div
// broadcast on both sides, forward against the CPU reference and every operand's gradient
// (summed over its broadcast axes) against finite differences; add and mul keep their own
// nodes where one operand broadcasts one-sidedly.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/ops/reference/map_reduce.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;
using ops::MapFn;
using ops::Shape;

class GraphBinaryTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(GraphBinaryTest, BothSidesBroadcastWithGradients) {
  SCOPED_TRACE(rng_.describe());
  struct Case {
    Shape a, b;
  };
  // Odd sizes; the divisor kept in [0.5, 1.5].
  const Case cases[] = {{{3, 1, 5}, {4, 1}}, {{2, 3, 1, 1, 3}, {5, 2, 1}}, {{5, 3}, {5, 3}}};
  const graph::Init divisor = graph::Init::uniform(0.5f, 1.5f);
  for (MapFn fn : {MapFn::Add, MapFn::Sub, MapFn::Mul, MapFn::Div})
    for (const Case& c : cases) {
      SCOPED_TRACE(testing::Message()
                   << ops::mapFnName(fn) << " " << c.a.str() << ", " << c.b.str());
      const Shape space = ops::broadcastShape("test", c.a, c.b);
      EXPECT_TRUE(checkGraphOp(
          ctx(), rng_, {{c.a}, {c.b, fn == MapFn::Div ? divisor : graph::Init::uniform(-1, 1)}},
          [&](Graph& g, const std::vector<Tensor>& t) { return g.binary(fn, t[0], t[1]); },
          [&](const Values& v) {
            return ops::ref::mapReduce(fn, ops::Fold::Sum, {v[0].data(), v[1].data()}, {c.a, c.b},
                                       space, 0);
          }));
    }
}

TEST(GraphBinaryShapeTest, PicksTheKernelAndNamesBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {3, 4, 5}), row = g.input("row", {5});
  g.add(row, x);
  EXPECT_EQ(g.nodes().back().op, OpKind::Add) << "a one-sided broadcast left its fast kernel";
  const Tensor y = g.add(x, g.input("col", {3, 1, 5}));  // kept axes not adjacent
  EXPECT_EQ(g.nodes().back().op, OpKind::Binary);
  EXPECT_EQ(g.shape(y), (Shape{3, 4, 5}));
  EXPECT_EQ(g.shape(g.mul(g.input("c", {4, 1}), g.input("r", {1, 6}))), (Shape{4, 6}));
  EXPECT_EQ(g.shape(g.sub(row, x)), (Shape{3, 4, 5})) << "sub broadcasts its first operand too";
  const size_t nodes = g.nodes().size();
  try {
    g.div(x, g.input("bad", {4, 2}));
    ADD_FAILURE() << "(3,4,5) / (4,2) accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("div: (3,4,5) and (4,2) do not broadcast"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.sub(x, g.input("ids", {5}, ops::DType::U32)), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes) << "a refused op added a node";
}

}  // namespace
}  // namespace vkgrad::test
