// The graph's gatherAxis (engine/vkgrad/runtime/ops/gather_axis.cpp): take along every axis,
// ids repeated (their gradients add), forward exact against a CPU take, gradients against
// finite differences; and the narrowing of 64-bit and negative indices.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphGatherAxisTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(GraphGatherAxisTest, EveryAxisWithGradients) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{3, 5, 4}, ids_shape{2, 3};
  for (int axis : {0, 1, 2}) {
    SCOPED_TRACE(testing::Message() << "axis " << axis);
    WordInput ids{ids_shape, rng_.below(6, uint32_t(x[axis]))};
    ids.values[1] = ids.values[4];  // a repeat: its gradients add
    int64_t dims[Shape::kMaxRank], rank = 0;
    for (int a = 0; a < axis; ++a) dims[rank++] = x[a];
    dims[rank++] = 2, dims[rank++] = 3;
    for (int a = axis + 1; a < 3; ++a) dims[rank++] = x[a];
    const Shape out = Shape::of(dims, int(rank));
    EXPECT_TRUE(checkGraphOp(
        ctx(), rng_, {{x}},
        [&](Graph& g, const std::vector<Tensor>& t) {
          const Tensor y = g.gatherAxis(t[0], t[1], axis);
          EXPECT_EQ(g.shape(y), out);
          return y;
        },
        [&](const Values& v) {
          std::vector<float> y(size_t(out.numel()));
          for (int64_t e = 0; e < out.numel(); ++e) {
            const auto oi = unflatIndex(out, e);
            std::vector<int64_t> xi;
            for (int a = 0; a < axis; ++a) xi.push_back(oi[size_t(a)]);
            xi.push_back(ids.values[size_t(oi[size_t(axis)] * 3 + oi[size_t(axis) + 1])]);
            for (int a = axis + 1; a < 3; ++a) xi.push_back(oi[size_t(a + 1)]);
            y[size_t(e)] = v[0][size_t(flatIndex(x, xi))];
          }
          return y;
        },
        0.0, {ids}));
  }
}

TEST(GraphGatherAxisShapeTest, IndicesNarrowWithARangeCheck) {
  const std::vector<int64_t> ids{0, 4, -1, -5};
  EXPECT_EQ(Graph::narrowIndices(ids, 5), (std::vector<uint32_t>{0, 4, 4, 0}));
  const std::vector<int64_t> high{2, 5}, low{-6}, huge{int64_t(1) << 40};
  EXPECT_THROW(Graph::narrowIndices(high, 5), ShapeError);
  EXPECT_THROW(Graph::narrowIndices(low, 5), ShapeError);
  EXPECT_THROW(Graph::narrowIndices(huge, 5), ShapeError);
  Graph g;
  EXPECT_THROW(g.gatherAxis(g.input("x", {3, 4}), g.input("i", {2}, ops::DType::U32), 2),
               ShapeError);
}

}  // namespace
}  // namespace vkgrad::test
