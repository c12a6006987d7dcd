// Executor profiling: a timestamp after every node, summed by op kind.
#include "vkgrad/runtime/profile.h"

#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;

class ProfileTest : public VkTest {};

// x (13, 7) -> linear -> GELU -> linear (5 classes) -> cross-entropy, backward and AdamW.
struct Model {
  Graph g;
  Tensor x, y, loss;
};
void build(Model& m, graph::ParameterStore& store) {
  m.x = m.g.input("x", {13, 7});
  m.y = m.g.input("y", {13}, ops::DType::U32);
  const Tensor w1 = m.g.parameter(store.add("w1", {7, 11}, Init::xavierUniform()));
  const Tensor b1 = m.g.parameter(store.add("b1", {11}, Init::zeros()));
  const Tensor w2 = m.g.parameter(store.add("w2", {11, 5}, Init::xavierUniform()));
  const Tensor h = m.g.activation(m.g.matmul(m.x, w1, b1), ops::Activation::GeluTanh);
  m.loss = m.g.crossEntropy(m.g.matmul(h, w2), m.y);
  m.g.markOutput(m.loss);
  const graph::Gradients grads = graph::backward(m.g, m.loss);
  graph::addOptimizer(m.g, grads, {graph::OptimizerConfig::Kind::AdamW, 1e-2f});
}

// Every launched node gets a time, the times add up to the step's, the summary counts each
// kind's nodes, and profiling changes no result bit.
TEST_F(ProfileTest, TimesEveryNodeWithoutChangingResults) {
  ASSERT_NE(ctx().info().timestamp_valid_bits, 0u) << "this test needs queue timestamps";
  Rng rng;
  graph::ParameterStore store_a(ctx()), store_b(ctx());
  Model a, b;
  build(a, store_a);
  build(b, store_b);
  store_a.initialize(rng.seed());
  store_b.initialize(rng.seed());
  graph::CompileOptions profiled;
  profiled.profile = true;
  graph::Executor timed(ctx(), a.g, profiled), plain(ctx(), b.g);
  const std::vector<float> x = rng.normal(13 * 7);
  std::vector<uint32_t> y(13);
  for (auto& v : y) v = rng.below(5);
  timed.setInput(a.x, x);
  timed.setInput(a.y, y);
  plain.setInput(b.x, x);
  plain.setInput(b.y, y);
  EXPECT_TRUE(timed.profile().empty());  // nothing ran yet

  for (int step = 0; step < 3; ++step) {
    timed.step();
    plain.step();
    const float la = timed.readScalar(a.loss), lb = plain.readScalar(b.loss);
    ASSERT_TRUE(std::isfinite(la));
    uint32_t ua, ub;
    std::memcpy(&ua, &la, 4);
    std::memcpy(&ub, &lb, 4);
    EXPECT_EQ(ua, ub) << "step " << step << ", " << rng.describe();
  }
  EXPECT_TRUE(plain.profile().empty());  // not asked for

  const std::vector<graph::NodeTime> profile = timed.profile();
  ASSERT_EQ(profile.size(), timed.plan().order.size());
  double sum = 0.0;
  std::map<graph::OpKind, int> launched;
  for (size_t i = 0; i < profile.size(); ++i) {
    EXPECT_EQ(profile[i].node, timed.plan().order[i]);
    EXPECT_GE(profile[i].ms, 0.0);
    sum += profile[i].ms;
    const graph::Node& node = a.g.nodes()[size_t(profile[i].node)];
    if (!node.isView()) launched[node.op] += 1;
  }
  // No generator in this graph, so the node times cover the whole step.
  EXPECT_GT(timed.gpuMilliseconds(), 0.0);
  EXPECT_NEAR(sum, timed.gpuMilliseconds(), 1e-6 * timed.gpuMilliseconds());

  const std::vector<graph::OpTime> by_op = graph::timeByOp(a.g, profile);
  ASSERT_EQ(by_op.size(), launched.size());
  EXPECT_EQ(launched[graph::OpKind::Matmul], 2);
  EXPECT_EQ(launched[graph::OpKind::AdamWUpdate], 1);  // one node updates all 3 parameters
  double by_op_sum = 0.0;
  for (size_t i = 0; i < by_op.size(); ++i) {
    EXPECT_EQ(by_op[i].nodes, launched[by_op[i].op]) << graph::opName(by_op[i].op);
    if (i > 0) {
      EXPECT_LE(by_op[i].ms, by_op[i - 1].ms);  // most expensive first
    }
    by_op_sum += by_op[i].ms;
  }
  EXPECT_NEAR(by_op_sum, sum, 1e-9 + 1e-9 * sum);
  const std::string table = graph::formatProfile(a.g, profile);
  EXPECT_NE(table.find("adamw"), std::string::npos) << table;
  EXPECT_NE(table.find("total"), std::string::npos) << table;
}

}  // namespace
}  // namespace vkgrad::test
