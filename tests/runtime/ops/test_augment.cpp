// The graph's augment op (engine/vkgrad/runtime/ops/augment.cpp): fresh draws every step from the
// graph's generator, reproducible from the seed, a stream per call site, nothing in an
// evaluation graph, and no gradient rule. The kernel is checked against the CPU reference
// in tests/ops/test_augment.cpp.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/augment.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/augment.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;

class GraphAugmentTest : public VkTest {
 protected:
  Rng rng_;
};

constexpr int64_t kB = 12, kH = 9, kW = 11, kPad = 3;

// Two call sites on the same images, run for two steps. Each output must be the reference's
// for its stream (the graph numbers call sites 0, 1, ... in the order they are built) at the
// step's generator offset (the executor adds 1 after each step), exactly.
TEST_F(GraphAugmentTest, EveryStepDrawsAnewAndTheSeedFixesTheDraws) {
  SCOPED_TRACE(rng_.describe());
  const uint64_t seed = rng_.seed();
  const auto x = rng_.normal(size_t(kB * kH * kW));
  auto run = [&](uint64_t graph_seed) {
    Graph g;
    g.setSeed(graph_seed);
    const Tensor images = g.input("images", {kB, kH, kW});
    const Tensor a = graph::augment(g, images, kPad, true),
                 b = graph::augment(g, images, kPad, true, -1.5f);
    EXPECT_EQ(g.nodes().back().op, OpKind::Augment);
    g.markOutput(a);
    g.markOutput(b);
    graph::Executor exec(ctx(), g);
    exec.setInput(images, x);
    std::vector<std::vector<float>> outs;
    for (int step = 0; step < 2; ++step) {
      exec.step();
      outs.push_back(exec.read(a));
      outs.push_back(exec.read(b));
    }
    return outs;  // step 0: a, b; step 1: a, b
  };
  const auto outs = run(seed);
  for (int step = 0; step < 2; ++step)
    for (uint32_t site = 0; site < 2; ++site) {
      SCOPED_TRACE(testing::Message() << "step " << step << ", call site " << site);
      std::vector<float> want(x.size());
      ops::ref::augment({seed, uint64_t(step), site}, x.data(), want.data(), kB, kH, kW, kPad, true,
                        site == 0 ? 0.0f : -1.5f);
      EXPECT_TRUE(allClose(outs[size_t(2 * step + site)], want, 0.0));
    }
  EXPECT_NE(outs[0], outs[2]) << "the second step repeated the first step's draws";
  EXPECT_NE(outs[0], outs[1]) << "two call sites drew the same";
  EXPECT_EQ(run(seed), outs) << "the same seed gave other draws";
  EXPECT_NE(run(seed + 1)[0], outs[0]) << "another seed gave the same draws";
}

TEST(GraphAugmentShapeTest, IdentityWhenOffOrEvaluatingAndNamesBadArguments) {
  Graph g;
  const Tensor images = g.input("images", {2, 28, 28});
  EXPECT_EQ(graph::augment(g, images, 0, false), images);
  EXPECT_FALSE(g.rngState()) << "a no-op augment made a generator";
  const size_t nodes = g.nodes().size();
  try {
    graph::augment(g, images, 28, true);
    ADD_FAILURE() << "pad 28 of 28 accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("augment: images (2,28,28) with pad 28: "),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::augment(g, images, -1, false), ShapeError);
  EXPECT_THROW(graph::augment(g, g.input("flat", {28, 28}), 2, true), ShapeError);
  EXPECT_THROW(graph::augment(g, g.input("words", {2, 28, 28}, ops::DType::U32), 2, true),
               ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_EQ(g.shape(graph::augment(g, images, 2, true)), (ops::Shape{2, 28, 28}));

  Graph eval;
  eval.setTraining(false);
  const Tensor e = eval.input("images", {2, 28, 28});
  EXPECT_EQ(graph::augment(eval, e, 2, true), e);
  EXPECT_TRUE(eval.nodes().empty());
  EXPECT_FALSE(eval.rngState());
  EXPECT_THROW(graph::augment(eval, e, 30, true), ShapeError)
      << "bad arguments pass when evaluating";
}

// Images are data; one that depends on a parameter has no gradient through augment, and
// autograd says so instead of dropping it.
TEST_F(GraphAugmentTest, BackwardThroughAugmentIsAnError) {
  graph::ParameterStore store(ctx());
  const auto& learned = store.add("learned", {2, 5, 5}, graph::Init::normal(0.0f, 1.0f));
  Graph g;
  const Tensor labels = g.input("labels", {2}, ops::DType::U32);
  const Tensor logits = g.reshape(graph::augment(g, g.parameter(learned), 1, true), {2, 25});
  const Tensor loss = g.crossEntropy(logits, labels);
  try {
    graph::backward(g, loss);
    ADD_FAILURE() << "a gradient went through augment";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backward: no rule for augment"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vkgrad::test
