// The graph's conv2d op (engine/vkgrad/runtime/ops/conv2d.cpp): its shape rule and errors, and
// its backward (dx, dw, dbias, one node) against finite differences through a compiled graph.
// The kernels are checked against the CPU reference in tests/ops/test_conv2d.cpp.
#include <string>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/conv2d.h"
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
using ops::Conv2dParams;

TEST(GraphConv2dTest, ShapesAndBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {2, 3, 28, 28});
  const Tensor w = g.input("w", {8, 3, 5, 5}), b = g.input("b", {8});
  EXPECT_EQ(g.shape(g.conv2d(x, w, b, Conv2dParams::square(1, 2))), (ops::Shape{2, 8, 28, 28}));
  EXPECT_EQ(g.shape(g.conv2d(x, w, {}, Conv2dParams::square(2, 0))), (ops::Shape{2, 8, 12, 12}));
  EXPECT_EQ(g.nodes().back().op, OpKind::Conv2d);
  const size_t nodes = g.nodes().size();
  try {
    g.conv2d(x, g.input("w2", {8, 2, 5, 5}), {}, Conv2dParams::square(1, 0));
    ADD_FAILURE() << "a weight of 2 input channels accepted for 3";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d: x (2,3,28,28) w (8,2,5,5) "), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.conv2d(x, w, g.input("b2", {7}), {}), ShapeError);
  EXPECT_THROW(g.conv2d(g.input("ids", {2, 3, 28, 28}, ops::DType::U32), w, b, {}), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphConv2dGradTest : public VkTest {
 protected:
  Rng rng_;
};

// Learned images through three convolutions and two linear heads: x -> conv(w1; stride 2,
// asymmetric padding, no bias) -> conv(w1 again, b1; "same"), and x -> conv(w2, b2; two
// groups, dilation 2). Every parameter's gradient, the images' included (col2im), against
// central differences of the loss; the images and w1 each get one overwriting and one
// accumulating contribution.
TEST_F(GraphConv2dGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& images = store.add("images", {2, 4, 7, 6}, Init::normal(0.0f, 1.0f));
  const auto& w1 = store.add("w1", {4, 4, 3, 3}, Init::xavierUniform());
  const auto& b1 = store.add("b1", {4}, Init::normal(0.0f, 0.5f));
  const auto& w2 = store.add("w2", {6, 2, 2, 3}, Init::xavierUniform());
  const auto& b2 = store.add("b2", {6}, Init::normal(0.0f, 0.5f));
  const auto& h1 = store.add("h1", {4 * 4 * 3, 3}, Init::xavierUniform());
  const auto& h2 = store.add("h2", {6 * 3 * 1, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor labels = g.input("labels", {2}, ops::DType::U32);
  const Tensor x = g.parameter(images);
  const Tensor y1 = g.conv2d(x, g.parameter(w1), {}, {2, 2, 1, 1, 1, 0, 1, 1, 1});  // (2,4,4,3)
  const Tensor y1b = g.conv2d(y1, g.parameter(w1), g.parameter(b1), Conv2dParams::square(1, 1));
  const Tensor y2 =
      g.conv2d(x, g.parameter(w2), g.parameter(b2), Conv2dParams::square(2, 0, 2, 2));  // (2,6,3,1)
  const Tensor l1 = g.crossEntropy(g.matmul(g.reshape(y1b, {2, 48}), g.parameter(h1)), labels);
  const Tensor l2 = g.crossEntropy(g.matmul(g.reshape(y2, {2, 18}), g.parameter(h2)), labels);
  const Tensor loss = g.add(l1, l2);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int overwrite = 0, accumulate = 0;
  for (const auto& node : g.nodes())
    if (node.op == OpKind::Conv2dBackward)
      for (size_t i = 0; i < 2; ++i)  // dx, dw
        if (node.outputs[i] >= 0)
          (node.writes[i] == ops::Write::Overwrite ? overwrite : accumulate) += 1;
  EXPECT_EQ(overwrite, 4);   // x's and w2's (from y2), y1's and w1's (from y1b)
  EXPECT_EQ(accumulate, 2);  // x's and w1's again (from y1)

  graph::Executor exec(ctx(), g);
  exec.setInput(labels, rng_.below(2, 3));
  const GradCheckOptions options = lossGradCheckOptions(6);
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_, options));
}

}  // namespace
}  // namespace vkgrad::test
