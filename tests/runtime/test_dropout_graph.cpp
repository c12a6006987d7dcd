// Dropout in the graph: the rate and scale of the forward mask, a fresh mask every step, the
// same mask in the step's backward pass (finite differences with the generator reset before
// each step), and no dropout at all in an evaluation graph.
#include <cmath>
#include <vector>

#include "common/gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;

class DropoutGraphTest : public VkTest {};

TEST_F(DropoutGraphTest, DropsAtTheRateScalesTheRestAndRedrawsEveryStep) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Graph g;
  g.setSeed(rng.seed());
  const Tensor x = g.input("x", {64, 33});
  const Tensor y = g.dropout(x, 0.3f);
  g.markOutput(y);
  graph::Executor exec(ctx(), g);
  const auto values = rng.uniform(64 * 33, 0.5f, 2.0f);  // never 0: a kept element is visible
  exec.setInput(x, values);
  std::vector<std::vector<bool>> masks;
  for (int step = 0; step < 2; ++step) {
    exec.step();
    const auto out = exec.read(y);
    std::vector<bool> kept(out.size());
    size_t count = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      kept[i] = out[i] != 0.0f;
      count += kept[i];
      if (kept[i]) {
        EXPECT_NEAR(out[i], values[i] / 0.7f, 1e-6f * values[i]) << i;
      }
    }
    // Keep rate 0.7 over 2112 draws: sigma = sqrt(0.21 / 2112) = 0.01; 5 sigma.
    EXPECT_NEAR(double(count) / double(out.size()), 0.7, 0.05);
    masks.push_back(kept);
  }
  EXPECT_NE(masks[0], masks[1]) << "the second step reused the first step's mask";
}

TEST_F(DropoutGraphTest, BackwardUsesTheForwardMask) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {6, 5}, graph::Init::normal(0.0f, 0.5f));
  store.initialize(rng.seed());
  Graph g;
  g.setSeed(7);
  const Tensor x = g.input("x", {4, 6}), t = g.input("t", {4}, ops::DType::U32);
  const Tensor h = g.dropout(g.matmul(x, g.parameter(w)), 0.4f);
  const Tensor loss = g.crossEntropy(h, t);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng.normal(24));
  exec.setInput(t, std::vector<uint32_t>{0, 4, 2, 1});
  const ops::RngState start = ops::RngState::make(7);
  auto stepFromStart = [&] {  // the same mask every time: the generator as compiled
    ctx().staging().upload(*exec.view(g.rngState()).buffer, exec.view(g.rngState()).offset, &start,
                           sizeof(start));
    exec.step();
  };
  std::vector<float> values(30);
  ctx().staging().download(*w.buffer, w.offset, values.data(), values.size() * 4);
  stepFromStart();
  std::vector<float> analytic;
  for (const auto& [param, grad] : grads.parameters) analytic = exec.read(grad);
  auto lossFn = [&] {
    ctx().staging().upload(*w.buffer, w.offset, values.data(), values.size() * 4);
    stepFromStart();
    return double(exec.readScalar(loss));
  };
  GradCheckOptions options;
  options.rel_step = 1e-2;
  EXPECT_TRUE(checkGradients(lossFn, {{"w", &values, analytic}}, rng, options));
}

TEST_F(DropoutGraphTest, EvaluationGraphsDropNothing) {
  Graph g;
  g.setTraining(false);
  const Tensor x = g.input("x", {3, 4});
  EXPECT_EQ(g.dropout(x, 0.5f), x);
  EXPECT_FALSE(g.rngState());
  Graph train;
  const Tensor tx = train.input("x", {3, 4});
  EXPECT_EQ(train.dropout(tx, 0.0f), tx);
  EXPECT_THROW(train.dropout(tx, 1.0f), ShapeError);
  EXPECT_THROW(train.dropout(tx, -0.1f), ShapeError);
}

}  // namespace
}  // namespace vkgrad::test
