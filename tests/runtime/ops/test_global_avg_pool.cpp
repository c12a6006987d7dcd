// The graph's globalAvgPool (engine/vkgrad/runtime/ops/global_avg_pool.cpp): shapes and errors,
// the means against a CPU computation, and the gradient against finite differences through a
// compiled graph. Its kernels are reduce.h's (tests/ops/test_reduce.cpp).
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using ops::Shape;

TEST(GraphGlobalAvgPoolTest, ShapesAndErrors) {
  Graph g;
  const Tensor y = g.globalAvgPool(g.input("x", {2, 3, 4, 5}));
  EXPECT_EQ(g.shape(y), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(g.nodes().back().op, OpKind::GlobalAvgPool);
  const size_t nodes = g.nodes().size();
  try {
    g.globalAvgPool(g.input("flat", {2, 3, 20}));
    ADD_FAILURE() << "a rank-3 x accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("globalAvgPool: (2,3,20): x must be"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphGlobalAvgPoolGradTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(GraphGlobalAvgPoolGradTest, MeansMatchTheReference) {
  SCOPED_TRACE(rng_.describe());
  const int64_t n = 3, c = 5, hw = 9 * 7;
  Graph g;
  const Tensor x = g.input("x", {n, c, 9, 7});
  const Tensor y = g.globalAvgPool(x);
  g.markOutput(y);
  graph::Executor exec(ctx(), g);
  const auto values = rng_.normal(size_t(n * c * hw), 0.5f, 1.0f);
  exec.setInput(x, values);
  exec.step();
  std::vector<float> want(size_t(n * c));
  for (size_t plane = 0; plane < want.size(); ++plane) {
    double sum = 0.0;
    for (int64_t i = 0; i < hw; ++i) sum += values[plane * size_t(hw) + size_t(i)];
    want[plane] = float(sum / double(hw));
  }
  EXPECT_TRUE(allClose(exec.read(y), want, 2e-6));
}

// A per-channel scale before the pool and a head after it: the scale's gradient is the
// pool's backward (dy / (H*W) spread over each plane) summed over the planes.
TEST_F(GraphGlobalAvgPoolGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& scale = store.add("scale", {4, 1, 1}, Init::uniform(0.5f, 1.5f));
  const auto& head = store.add("head", {4, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor x = g.input("x", {3, 4, 5, 3});
  const Tensor labels = g.input("labels", {3}, ops::DType::U32);
  const Tensor pooled =
      g.globalAvgPool(g.activation(g.mul(x, g.parameter(scale)), ops::Activation::Sigmoid));
  const Tensor loss =
      g.crossEntropy(g.matmul(g.reshape(pooled, {3, 4}), g.parameter(head)), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(180));
  exec.setInput(labels, rng_.below(3, 3));
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
      lossGradCheckOptions(12)));
}

}  // namespace
}  // namespace vkgrad::test
