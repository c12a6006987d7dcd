// The graph's batchNorm (engine/vkgrad/runtime/ops/batch_norm.cpp): the builder's checks, the
// whole-graph gradients against finite differences, the running statistics after two
// training steps against a CPU computation, and an evaluation graph's output against the
// reference. The kernels are checked against the reference in tests/ops/test_batch_norm.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
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
#include "vkgrad/training/optimizer.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/precision.h"
#include "vkgrad/ops/pad.h"
#include "vkgrad/ops/reference/batch_norm.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using ops::Shape;

constexpr float kEps = 1e-5f;

// The running statistics, PyTorch's names, in a store of their own: never trained, so the
// gradient check (every parameter of its store needs a gradient) does not see them.
struct Running {
  const graph::Parameter& mean;
  const graph::Parameter& var;
};
Running addRunning(graph::ParameterStore& store, const std::string& prefix, int64_t c) {
  return {store.add(prefix + ".running_mean", {c}, Init::zeros()),
          store.add(prefix + ".running_var", {c}, Init::ones())};
}

TEST(GraphBatchNormTest, BuildsTrainingAndEvaluationNodesAndNamesBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {4, 3, 5, 5});
  const Tensor gamma = g.input("gamma", {3}), beta = g.input("beta", {3});
  const Tensor rm = g.input("rm", {3}), rv = g.input("rv", {3});
  const Tensor y = g.batchNorm(x, gamma, beta, rm, rv);
  EXPECT_EQ(g.shape(y), (Shape{4, 3, 5, 5}));
  EXPECT_EQ(g.nodes().back().op, OpKind::BatchNorm);
  EXPECT_TRUE(g.nodes().back().sideEffects());  // the running statistics
  const Tensor activation = g.relu(rm);
  const size_t nodes = g.nodes().size();
  try {
    g.batchNorm(x, g.input("g8", {8}), beta, rm, rv);
    ADD_FAILURE() << "gamma (8) accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("needs gamma (3), got (8)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.batchNorm(x, gamma, beta, g.input("rm4", {4}), rv), ShapeError);
  EXPECT_THROW(g.batchNorm(x, gamma, beta, activation, rv), ShapeError);  // not persistent
  EXPECT_THROW(g.batchNorm(x, gamma, beta, rm, rv, kEps, 2.0f), ShapeError);
  EXPECT_THROW(g.batchNorm(g.input("one", {1, 3}), gamma, beta, rm, rv), ShapeError);
  g.setRecompute(true);
  EXPECT_THROW(g.recomputed([&] { return g.batchNorm(x, gamma, beta, rm, rv); }), Error);
  EXPECT_EQ(g.nodes().size(), nodes);

  g.setTraining(false);  // one value per channel is fine without batch statistics
  g.batchNorm(g.input("single", {1, 3}), gamma, beta, rm, rv);
  EXPECT_EQ(g.nodes().back().op, OpKind::BatchNormInference);
  EXPECT_FALSE(g.nodes().back().sideEffects());
}

class GraphBatchNormGradTest : public VkTest {
 protected:
  Rng rng_;
};

// x (5,4) -> matmul (4,6) -> batchNorm over 6 channels (an MLP) -> reshape (5,2,3) ->
// batchNorm over 2 channels of 3 positions (the (N,C,L) form) -> reshape -> head -> cross
// entropy: every gradient batchNorm has (x through the batch statistics, gamma, beta) in two
// layouts, against central differences of the loss.
TEST_F(GraphBatchNormGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx()), stats(ctx());
  const auto& w = store.add("w", {4, 6}, Init::xavierUniform());
  const auto& g1 = store.add("bn1.weight", {6}, Init::uniform(0.5f, 1.5f));
  const auto& b1 = store.add("bn1.bias", {6}, Init::uniform(-0.5f, 0.5f));
  const auto& g2 = store.add("bn2.weight", {2}, Init::uniform(0.5f, 1.5f));
  const auto& b2 = store.add("bn2.bias", {2}, Init::uniform(-0.5f, 0.5f));
  const auto& head = store.add("head", {6, 3}, Init::xavierUniform());
  const Running r1 = addRunning(stats, "bn1", 6), r2 = addRunning(stats, "bn2", 2);
  store.initialize(rng_.seed());
  stats.initialize(0);

  Graph g;
  const Tensor x = g.input("x", {5, 4});
  const Tensor labels = g.input("labels", {5}, ops::DType::U32);
  Tensor h = g.batchNorm(g.matmul(x, g.parameter(w)), g.parameter(g1), g.parameter(b1),
                         g.parameter(r1.mean), g.parameter(r1.var));
  h = g.batchNorm(g.reshape(h, {5, 2, 3}), g.parameter(g2), g.parameter(b2), g.parameter(r2.mean),
                  g.parameter(r2.var));
  const Tensor loss = g.crossEntropy(g.matmul(g.reshape(h, {5, 6}), g.parameter(head)), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  EXPECT_EQ(grads.parameters.size(), store.all().size());  // none for the running statistics

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(20));
  exec.setInput(labels, rng_.below(5, 3));
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
      lossGradCheckOptions(12)));
}

// Two training steps on fresh batches, then an evaluation graph over the same store: the
// running statistics follow PyTorch's update (momentum 0.1, the unbiased variance) step by
// step, untouched by the optimizer, and evaluation normalises with them.
TEST_F(GraphBatchNormGradTest, RunningStatisticsAndEvaluation) {
  SCOPED_TRACE(rng_.describe());
  const Shape shape{3, 4, 5, 3};
  const int64_t n = 3, c = 4, s = 15;
  graph::ParameterStore store(ctx());
  const auto& gamma = store.add("bn.weight", {c}, Init::uniform(0.5f, 1.5f));
  const auto& beta = store.add("bn.bias", {c}, Init::uniform(-0.5f, 0.5f));
  const Running r = addRunning(store, "bn", c);
  store.initialize(rng_.seed());

  // A whole training step: the optimizer (weight decay on vectors too) moves gamma and beta
  // and must leave the running statistics to the batch norm node.
  Graph train;
  const Tensor x = train.input("x", shape);
  const Tensor labels = train.input("labels", {n}, ops::DType::U32);
  const Tensor y = train.batchNorm(x, train.parameter(gamma), train.parameter(beta),
                                   train.parameter(r.mean), train.parameter(r.var), kEps);
  train.markOutput(y);
  const Tensor loss = train.crossEntropy(train.reshape(train.globalAvgPool(y), {n, c}), labels);
  graph::OptimizerConfig adamw{graph::OptimizerConfig::Kind::AdamW, 1e-2f};
  adamw.adamw.weight_decay = 0.1f;
  adamw.decay_vectors = true;
  graph::addOptimizer(train, graph::backward(train, loss), adamw);
  graph::Executor exec(ctx(), train);
  exec.setInput(labels, rng_.below(size_t(n), uint32_t(c)));
  std::vector<float> rm(size_t(c), 0.0f), rv(size_t(c), 1.0f), g, b;
  for (int step = 0; step < 2; ++step) {
    g = exec.read(train.parameter(gamma)), b = exec.read(train.parameter(beta));
    const auto values = rng_.normal(size_t(shape.numel()), 0.5f, 2.0f);
    exec.setInput(x, values);
    exec.step();
    std::vector<float> want(values.size()), mean(static_cast<size_t>(c)),
        rstd(static_cast<size_t>(c));
    ops::ref::batchNorm(values.data(), g.data(), b.data(), want.data(), mean.data(), rstd.data(),
                        rm.data(), rv.data(), n, c, s, kEps, 0.1f);
    EXPECT_TRUE(allClose(exec.read(y), want, 5e-6)) << "step " << step;
  }
  EXPECT_TRUE(allClose(exec.read(train.parameter(r.mean)), rm, 5e-6)) << "running_mean";
  EXPECT_TRUE(allClose(exec.read(train.parameter(r.var)), rv, 5e-6)) << "running_var";
  // A checkpoint holds them under PyTorch's names, as the store's other entries.
  bool saved = false;
  for (const graph::SavedTensor& t : store.download()) {
    if (t.name != "bn.running_var") continue;
    std::vector<float> values(t.data.size());
    std::memcpy(values.data(), t.data.data(), values.size() * 4);
    EXPECT_TRUE(allClose(values, rv, 5e-6)) << "saved running_var";
    saved = true;
  }
  EXPECT_TRUE(saved) << "bn.running_var not saved";

  g = exec.read(train.parameter(gamma)), b = exec.read(train.parameter(beta));
  Graph eval;
  eval.setTraining(false);
  const Tensor ex = eval.input("x", shape);
  const Tensor ey = eval.batchNorm(ex, eval.parameter(gamma), eval.parameter(beta),
                                   eval.parameter(r.mean), eval.parameter(r.var), kEps);
  eval.markOutput(ey);
  graph::Executor eval_exec(ctx(), eval);
  const auto values = rng_.normal(size_t(shape.numel()));
  eval_exec.setInput(ex, values);
  eval_exec.step();
  eval_exec.step();  // no side effects: the same statistics every step
  std::vector<float> want(values.size());
  ops::ref::batchNormInference(values.data(), g.data(), b.data(), rm.data(), rv.data(), want.data(),
                               n, c, s, kEps);
  EXPECT_TRUE(allClose(eval_exec.read(ey), want, 5e-6));
  EXPECT_TRUE(allClose(eval_exec.read(eval.parameter(r.mean)), rm, 5e-6));
}

// Differentiating an evaluation graph (a frozen batch norm being fine-tuned): the running
// statistics are constants, so the gradients are those of an affine map.
TEST_F(GraphBatchNormGradTest, EvaluationGraphGradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx()), stats(ctx());
  const auto& w = store.add("w", {3, 4}, Init::xavierUniform());
  const auto& gamma = store.add("bn.weight", {2}, Init::uniform(0.5f, 1.5f));
  const auto& beta = store.add("bn.bias", {2}, Init::uniform(-0.5f, 0.5f));
  const auto& head = store.add("head", {4, 3}, Init::xavierUniform());
  const auto& rm = stats.add("bn.running_mean", {2}, Init::uniform(-0.5f, 0.5f));
  const auto& rv = stats.add("bn.running_var", {2}, Init::uniform(0.5f, 2.0f));
  store.initialize(rng_.seed());
  stats.initialize(rng_.seed() + 1);

  Graph g;
  g.setTraining(false);
  const Tensor x = g.input("x", {6, 3});
  const Tensor labels = g.input("labels", {6}, ops::DType::U32);
  const Tensor h =
      g.batchNorm(g.reshape(g.matmul(x, g.parameter(w)), {6, 2, 2}), g.parameter(gamma),
                  g.parameter(beta), g.parameter(rm), g.parameter(rv));
  const Tensor loss = g.crossEntropy(g.matmul(g.reshape(h, {6, 4}), g.parameter(head)), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(18));
  exec.setInput(labels, rng_.below(6, 3));
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
      lossGradCheckOptions(12)));
}

// A conv-net tail (batchNorm, reflect pad, global average pool, head) stored in bf16 by the
// precision policy: activations and their gradients 16-bit, the saved statistics and
// the running ones f32. The parameters' gradients stay within the 16-bit roundings of the
// f32 graph's.
TEST_F(GraphBatchNormGradTest, SixteenBitPrecisionPolicy) {
  SCOPED_TRACE(rng_.describe());
  const auto x = rng_.normal(2 * 3 * 5 * 5);
  const auto targets = rng_.below(2, 4);
  std::vector<std::vector<float>> dgamma;
  // bf16 only: f16 runs the same kernels (tests/ops/test_batch_norm.cpp has both formats).
  for (graph::Precision precision : {graph::Precision::F32, graph::Precision::BF16}) {
    graph::ParameterStore store(ctx());
    const auto& gamma = store.add("bn.weight", {3}, Init::uniform(0.5f, 1.5f));
    const auto& beta = store.add("bn.bias", {3}, Init::uniform(-0.5f, 0.5f));
    const auto& head = store.add("head", {3, 4}, Init::xavierUniform());
    const Running r = addRunning(store, "bn", 3);
    store.initialize(7);
    Graph g;
    const Tensor xt = g.input("x", {2, 3, 5, 5});
    const Tensor yt = g.input("y", {2}, ops::DType::U32);
    Tensor h = g.batchNorm(g.relu(xt), g.parameter(gamma), g.parameter(beta), g.parameter(r.mean),
                           g.parameter(r.var));
    h = g.globalAvgPool(g.pad(g.relu(h), {1, 1, 2, 2, ops::PadMode::Reflect}));
    const Tensor loss = g.crossEntropy(g.matmul(g.reshape(h, {2, 3}), g.parameter(head)), yt);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::applyPrecision(g, precision);
    graph::Executor exec(ctx(), g);
    exec.setInput(xt, x);
    exec.setInput(yt, targets);
    exec.step();
    dgamma.push_back(exec.read(grads[g.parameter(gamma)]));
    EXPECT_EQ(g.tensor(g.parameter(r.mean)).dtype, ops::DType::F32);
  }
  double scale = 0;
  for (float v : dgamma[0]) scale = std::max(scale, double(std::fabs(v)));
  for (size_t p = 1; p < dgamma.size(); ++p)
    for (size_t i = 0; i < dgamma[0].size(); ++i)
      EXPECT_NEAR(dgamma[p][i], dgamma[0][i], 0.03 * scale) << "precision " << p << ", " << i;
}

}  // namespace
}  // namespace vkgrad::test
