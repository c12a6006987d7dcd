// The graph's VAE ops (engine/vkgrad/runtime/ops/reparameterize.cpp, vae_loss.cpp, accumulate.cpp):
// shape rules and errors; the gradients of both reconstruction kinds, the KL and the
// reparameterised sample against finite differences through a compiled graph (the generator
// reset before each step, so every evaluation draws the same eps); a fresh eps every step;
// and accumulate's running sum, zeroed by the host. The kernels are checked against the CPU
// reference in tests/ops/test_vae_loss.cpp and test_random.cpp.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/ops/vae_loss.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/reparameterize.h"
#include "vkgrad/runtime/ops/vae_loss.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;

TEST(GraphVaeOpsTest, ShapesAndNamesBadShapes) {
  Graph g;
  const Tensor mu = g.input("mu", {5, 3}), ls = g.input("ls", {5, 3});
  EXPECT_EQ(g.shape(graph::reparameterize(g, mu, ls)), (ops::Shape{5, 3}));
  EXPECT_EQ(g.shape(graph::gaussianKl(g, mu, ls)), (ops::Shape{1}));
  EXPECT_EQ(g.shape(graph::reconstructionLoss(g, mu, ls, ops::Reconstruction::Mse)),
            (ops::Shape{1}));
  const size_t nodes = g.nodes().size();
  const Tensor other = g.input("other", {5, 4});
  try {
    graph::gaussianKl(g, mu, other);
    ADD_FAILURE() << "mismatched shapes accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find(
            "gaussianKl: mu (5,3), log_sigma (5,4): mu and log_sigma must have the same shape"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::reparameterize(g, mu, other), ShapeError);
  EXPECT_THROW(graph::reconstructionLoss(g, mu, g.input("ids", {5, 3}, ops::DType::U32),
                                         ops::Reconstruction::Bce),
               ShapeError);
  const Tensor total = g.input("total", {5, 3});
  EXPECT_THROW(g.runningTotal(mu, g.reshape(total, {15})), ShapeError);  // a view, not the input
  EXPECT_THROW(g.runningTotal(mu, g.add(total, total)), ShapeError);     // not an input
  EXPECT_EQ(g.nodes().size(), nodes + 2);  // just the reshape view and the add
}

class GraphVaeOpsGradTest : public VkTest {
 protected:
  Rng rng_;
};

// A tiny VAE loss on learned inputs: x (3,10) -> mu, log_sigma (3,4) by two projections,
// z = reparameterize, logits (3,10) = z W_dec, loss = recon(logits, targets) + 0.7 KL. Every
// parameter's gradient against central differences, for each reconstruction kind, with the
// generator reset to its compiled state before every step.
TEST_F(GraphVaeOpsGradTest, GradientsMatchFiniteDifferences) {
  for (ops::Reconstruction kind : {ops::Reconstruction::Bce, ops::Reconstruction::Mse}) {
    SCOPED_TRACE(kind == ops::Reconstruction::Bce ? "bce" : "mse");
    graph::ParameterStore store(ctx());
    const auto& x = store.add("x", {3, 10}, Init::normal(0.0f, 1.0f));
    const auto& wmu = store.add("wmu", {10, 4}, Init::normal(0.0f, 0.4f));
    const auto& wls = store.add("wls", {10, 4}, Init::normal(0.0f, 0.2f));
    const auto& wdec = store.add("wdec", {4, 10}, Init::normal(0.0f, 0.5f));
    store.initialize(rng_.seed());
    Graph g;
    g.setSeed(rng_.seed() + 1);
    const Tensor targets = g.input("targets", {3, 10});
    const Tensor xi = g.parameter(x);
    const Tensor mu = g.matmul(xi, g.parameter(wmu)), ls = g.matmul(xi, g.parameter(wls));
    const Tensor logits = g.matmul(graph::reparameterize(g, mu, ls), g.parameter(wdec));
    const Tensor loss = g.add(graph::reconstructionLoss(g, logits, targets, kind),
                              g.mul(graph::gaussianKl(g, mu, ls), g.constant("beta", {1}, {0.7f})));
    g.markOutput(loss);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::Executor exec(ctx(), g);
    exec.setInput(targets, rng_.uniform(30, 0.0f, 1.0f));
    const ops::RngState start = ops::RngState::make(rng_.seed() + 1);
    const ops::TensorView state = exec.view(g.rngState());
    EXPECT_TRUE(checkParameterGradients(
        ctx(), store, g, grads, exec,
        [&] {  // the helper stepped with an advanced generator: step again from the start
          ctx().staging().upload(*state.buffer, state.offset, &start, sizeof(start));
          exec.step();
          return double(exec.readScalar(loss));
        },
        rng_, lossGradCheckOptions(16)));
  }
}

// z - mu is exp(log_sigma) * eps: standard normal eps, fresh on every step, reproducible
// from the seed.
TEST_F(GraphVaeOpsGradTest, EveryStepDrawsAFreshEpsAndASeedRepeatsThem) {
  auto draws = [&](uint64_t seed) {
    Graph g;
    g.setSeed(seed);
    const Tensor mu = g.input("mu", {64, 33}), ls = g.input("ls", {64, 33});
    const Tensor z = graph::reparameterize(g, mu, ls);
    g.markOutput(z);
    graph::Executor exec(ctx(), g);
    exec.setInput(mu, std::vector<float>(64 * 33, 1.0f));
    exec.setInput(ls, std::vector<float>(64 * 33, std::log(2.0f)));
    std::vector<std::vector<float>> eps;
    for (int step = 0; step < 2; ++step) {
      exec.step();
      std::vector<float> e = exec.read(z);
      double sum = 0, sum2 = 0;
      for (float& v : e) {
        v = (v - 1.0f) / 2.0f;
        sum += v;
        sum2 += double(v) * v;
      }
      const double n = double(e.size()), mean = sum / n;
      EXPECT_NEAR(mean, 0.0, 5.0 / std::sqrt(n));                          // 5 sigma
      EXPECT_NEAR(sum2 / n - mean * mean, 1.0, 5.0 * std::sqrt(2.0 / n));  // 5 sigma
      eps.push_back(e);
    }
    EXPECT_NE(eps[0], eps[1]) << "the second step reused the first step's eps";
    return eps;
  };
  const uint64_t seed = rng_.seed();
  EXPECT_EQ(draws(seed), draws(seed));
  EXPECT_NE(draws(seed)[0], draws(seed + 1)[0]);
}

// total += x every step; setInput zeroes it; one read gives the sum.
TEST_F(GraphVaeOpsGradTest, AccumulateSumsStepsUntilTheHostResetsIt) {
  Graph g;
  const Tensor x = g.input("x", {7}), total = g.input("total", {7});
  g.runningTotal(g.add(x, x), total);
  graph::Executor exec(ctx(), g);
  const std::vector<float> zeros(7, 0.0f);
  exec.setInput(total, zeros);
  std::vector<float> want(7, 0.0f);
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> values = rng_.uniform(7);
    exec.setInput(x, values);
    exec.step();
    for (size_t i = 0; i < 7; ++i) want[i] += 2.0f * values[i];
  }
  const std::vector<float> got = exec.read(total);
  for (size_t i = 0; i < 7; ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
  exec.setInput(total, zeros);
  exec.setInput(x, std::vector<float>(7, 0.5f));
  exec.step();
  EXPECT_EQ(exec.read(total), std::vector<float>(7, 1.0f));
}

}  // namespace
}  // namespace vkgrad::test
