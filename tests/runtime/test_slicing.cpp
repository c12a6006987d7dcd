// Where a step splits into pieces (runtime/slicing.h), from fixed costs: no device, no timing.
#include <gtest/gtest.h>

#include <vector>

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/slicing.h"

namespace vkgrad::test {
namespace {

TEST(SlicingTest, PiecesByCountSkipNodesWithoutALaunch) {
  graph::Graph g;
  const graph::Tensor x = g.input("x", {3, 4});
  // nodes: 0 relu, 1 reshape (a view: no launch), 2 relu, 3 relu
  g.relu(g.relu(g.reshape(g.relu(x), {4, 3})));
  const std::vector<int> order{0, 1, 2, 3};
  EXPECT_EQ(graph::piecesByCount(g, order, 0), (std::vector<size_t>{0}));
  EXPECT_EQ(graph::piecesByCount(g, order, 1), (std::vector<size_t>{0, 2, 3}));
  EXPECT_EQ(graph::piecesByCount(g, order, 2), (std::vector<size_t>{0, 3}));
  EXPECT_EQ(graph::piecesByCount(g, order, 3), (std::vector<size_t>{0}));
}

TEST(SlicingTest, PiecesByCostFillTheBudgetInPlanOrder) {
  // Node 1 has no cost (it joins node 0's piece); node 3 is over the budget: a piece alone.
  const std::vector<double> cost{1, -1, 2, 5, 1, 1};
  EXPECT_EQ(graph::piecesByCost(std::vector<int>{0, 1, 2, 3, 4, 5}, cost, 3.0),
            (std::vector<size_t>{0, 3, 4}));
  // The costs are by node, the positions by plan order.
  EXPECT_EQ(graph::piecesByCost(std::vector<int>{3, 0, 2, 4, 5}, cost, 3.0),
            (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(graph::piecesByCost(std::vector<int>{0, 2, 4}, cost, 100.0), (std::vector<size_t>{0}));
}

}  // namespace
}  // namespace vkgrad::test
