// The graph's takeRow op (engine/vkgrad/runtime/ops/take_row.cpp): its shape rule and errors, and its
// backward against finite differences through a compiled graph. The kernels are checked
// against the CPU reference in tests/ops/test_take_row.cpp.
#include <string>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/take_row.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;

TEST(GraphTakeRowTest, ShapesAndNamesBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {2, 4, 8});
  EXPECT_EQ(g.shape(graph::takeRow(g, x, 3)), (ops::Shape{2, 8}));
  EXPECT_EQ(g.nodes().back().op, OpKind::TakeRow);
  const size_t nodes = g.nodes().size();
  try {
    graph::takeRow(g, x, 4);
    ADD_FAILURE() << "row 4 of 4 accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("takeRow: x (2,4,8) with index 4: index must be in [0, 4)"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::takeRow(g, x, -1), ShapeError);
  EXPECT_THROW(graph::takeRow(g, g.input("flat", {4, 8}), 0), ShapeError);
  EXPECT_THROW(graph::takeRow(g, g.input("ids", {2, 4, 8}, ops::DType::U32), 0), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphTakeRowGradTest : public VkTest {
 protected:
  Rng rng_;
};

// h = x W (3,5,6); rows 2 and 4 of each batch each go through a head to a loss. The backward
// of the later takeRow overwrites all of dh (zeros outside row 4), the earlier one adds into
// row 2; rows 0, 1 and 3 must get exactly 0, which the check sees through W.
TEST_F(GraphTakeRowGradTest, GradientsMatchFiniteDifferences) {
  SCOPED_TRACE(rng_.describe());
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {4, 6}, Init::xavierUniform());
  const auto& head = store.add("head", {6, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor x = g.input("x", {3, 5, 4});
  const Tensor labels = g.input("labels", {3}, ops::DType::U32);
  const Tensor labels4 = g.input("labels4", {3}, ops::DType::U32);
  const Tensor h = g.matmul(x, g.parameter(w));
  const Tensor hp = g.parameter(head);
  const Tensor l2 = g.crossEntropy(g.matmul(graph::takeRow(g, h, 2), hp), labels);
  const Tensor l4 = g.crossEntropy(g.matmul(graph::takeRow(g, h, 4), hp), labels4);
  const Tensor loss = g.add(l2, l4);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int overwrite = 0, accumulate = 0;
  for (const auto& node : g.nodes())
    if (node.op == OpKind::TakeRowBackward)
      (node.writes[0] == ops::Write::Overwrite ? overwrite : accumulate) += 1;
  EXPECT_EQ(overwrite, 1);
  EXPECT_EQ(accumulate, 1);

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(60));
  exec.setInput(labels, rng_.below(3, 3));
  exec.setInput(labels4, rng_.below(3, 3));
  const GradCheckOptions options = lossGradCheckOptions(24);
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_, options));
}

}  // namespace
}  // namespace vkgrad::test
