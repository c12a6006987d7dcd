// The graph's pad op (engine/vkgrad/runtime/ops/pad.cpp): the builder's shapes and errors, and
// its backward (constant and reflect) against finite differences through a compiled graph.
// The kernels are checked against the CPU reference in tests/ops/test_pad.cpp.
#include <string>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/ops/pad.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using ops::PadMode;
using ops::Shape;

TEST(GraphPadTest, ShapesAndErrors) {
  Graph g;
  const Tensor x = g.input("x", {2, 3, 4, 5});
  const Tensor y = g.pad(x, {1, 2, 3, 4, PadMode::Reflect});
  EXPECT_EQ(g.shape(y), (Shape{2, 3, 7, 12}));
  EXPECT_EQ(g.nodes().back().op, OpKind::Pad);
  const size_t nodes = g.nodes().size();
  try {
    g.pad(x, {4, 0, 0, 0, PadMode::Reflect});
    ADD_FAILURE() << "reflect 4 of 4 rows accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("pad: x (2,3,4,5) with reflect"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.pad(g.input("ids", {4}, ops::DType::U32), {0, 0, 1, 1}), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphPadGradTest : public VkTest {
 protected:
  Rng rng_;
};

// x (2,3,4,5) scaled per channel by a parameter, reflect-padded, constant-padded with a
// non-zero fill, pooled and classified: the scale's gradient passes through both pads'
// backward (the reflect one adding the mirrored contributions).
TEST_F(GraphPadGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& scale = store.add("scale", {3, 1, 1}, Init::uniform(0.5f, 1.5f));
  const auto& head = store.add("head", {3, 4}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor x = g.input("x", {2, 3, 4, 5});
  const Tensor labels = g.input("labels", {2}, ops::DType::U32);
  Tensor h = g.mul(x, g.parameter(scale));
  h = g.pad(g.relu(h), {2, 1, 3, 2, PadMode::Reflect});
  h = g.pad(h, {0, 2, 1, 0, PadMode::Constant, 0.3f});
  h = g.reshape(g.globalAvgPool(h), {2, 3});
  const Tensor loss = g.crossEntropy(g.matmul(h, g.parameter(head)), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(120));
  exec.setInput(labels, rng_.below(2, 4));
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
      lossGradCheckOptions(12)));
}

}  // namespace
}  // namespace vkgrad::test
