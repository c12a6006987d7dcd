// The graph's mul op (engine/vkgrad/runtime/ops/mul.cpp): shapes, broadcasting, and its backward
// against finite differences through a compiled graph. The kernels themselves are checked
// against the CPU reference in tests/ops/test_elementwise.cpp.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;

TEST(GraphMulTest, BroadcastsTheSmallerOperandAndNamesBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {3, 4, 5}), row = g.input("row", {5});
  const Tensor y = g.mul(row, x);  // commutes: the larger operand gives the shape
  EXPECT_EQ(g.shape(y), (ops::Shape{3, 4, 5}));
  EXPECT_EQ(g.nodes().back().op, OpKind::Mul);
  EXPECT_EQ(g.nodes().back().inputs, (std::vector<int>{x.id, row.id}));
  const size_t nodes = g.nodes().size();
  try {
    g.mul(x, g.input("bad", {4, 1, 5}));
    ADD_FAILURE() << "(3,4,5) * (4,1,5) accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("mul: (3,4,5) and (4,1,5) do not broadcast"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.mul(x, g.input("ids", {5}, ops::DType::U32)), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphMulGradTest : public VkTest {
 protected:
  Rng rng_;
};

// gate = sigmoid(x W) * s (s (7) broadcast over rows), then h * gate (h used by both factors'
// paths) and a learned scalar: every gradient kind mul has (same shape, a broadcast row, a
// scalar, a tensor on both sides) against central differences of the loss.
TEST_F(GraphMulGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {4, 7}, Init::xavierUniform());
  const auto& s = store.add("s", {7}, Init::uniform(0.5f, 1.5f));
  const auto& c = store.add("c", {1}, Init::uniform(0.5f, 1.5f));
  const auto& head = store.add("head", {7, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor x = g.input("x", {5, 4});
  const Tensor labels = g.input("labels", {5}, ops::DType::U32);
  const Tensor h = g.matmul(x, g.parameter(w));
  const Tensor gate = g.mul(g.activation(h, ops::Activation::Sigmoid), g.parameter(s));
  const Tensor mixed = g.mul(g.mul(h, gate), g.parameter(c));
  const Tensor loss = g.crossEntropy(g.matmul(mixed, g.parameter(head)), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int mul_backward = 0;
  for (const auto& node : g.nodes()) mul_backward += node.op == OpKind::MulBackward;
  EXPECT_EQ(mul_backward, 6);  // both inputs of all three products lead to a parameter

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(20));
  exec.setInput(labels, rng_.below(5, 3));
  const GradCheckOptions options = lossGradCheckOptions(12);
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_, options));
}

}  // namespace
}  // namespace vkgrad::test
