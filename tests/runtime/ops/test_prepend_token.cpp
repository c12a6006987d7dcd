// The graph's prependToken op (engine/vkgrad/runtime/ops/prepend_token.cpp): its shape rule and
// errors, which gradients its backward node writes, and those gradients against finite differences
// through a compiled graph. The kernels are checked against the CPU reference in
// tests/ops/test_prepend_token.cpp.
#include <string>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/prepend_token.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using ops::Write;

TEST(GraphPrependTokenTest, ShapesAndNamesBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {2, 4, 8}), token = g.input("token", {8});
  EXPECT_EQ(g.shape(graph::prependToken(g, x, token)), (ops::Shape{2, 5, 8}));
  EXPECT_EQ(g.nodes().back().op, OpKind::PrependToken);
  const size_t nodes = g.nodes().size();
  try {
    graph::prependToken(g, x, g.input("short", {7}));
    ADD_FAILURE() << "a (7) token for C = 8 accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("prependToken: x (2,4,8), token (7)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::prependToken(g, g.input("flat", {4, 8}), token), ShapeError);
  EXPECT_THROW(graph::prependToken(g, x, g.input("ids", {8}, ops::DType::U32)), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphPrependTokenGradTest : public VkTest {
 protected:
  // tokens = prependToken(x W, cls) scored by a head on every row, for which of x W and cls
  // lead to a parameter (want_dx, want_token); with `twice`, cls is also added to every row
  // and x W scored on its own as well, so both gradients already hold a contribution when
  // prependToken's backward runs and it must accumulate. Returns the backward node's writes
  // (-1 for an output it does not have) after checking every gradient against central
  // differences of the loss.
  std::pair<int, int> check(bool want_dx, bool want_token, bool twice) {
    // Only parameters on the loss's path: the check needs a gradient for each.
    graph::ParameterStore store(ctx());
    const graph::Parameter* w = want_dx ? &store.add("w", {4, 6}, Init::xavierUniform()) : nullptr;
    const graph::Parameter* cls =
        want_token ? &store.add("cls", {6}, Init::normal(0.0f, 1.0f)) : nullptr;
    const auto& head = store.add("head", {6, 3}, Init::xavierUniform());
    store.initialize(rng_.seed());

    Graph g;
    const Tensor x = g.input("x", {3, 5, 4}), cls_in = g.input("cls_in", {6});
    const Tensor patches = g.input("patches", {3, 5, 6});
    const Tensor labels = g.input("labels", {18}, ops::DType::U32);
    const Tensor labels_x = g.input("labels_x", {15}, ops::DType::U32);
    const Tensor xw = want_dx ? g.matmul(x, g.parameter(*w)) : patches;
    const Tensor token = want_token ? g.parameter(*cls) : cls_in;
    Tensor tokens = graph::prependToken(g, xw, token);  // (3,6,6)
    if (twice) tokens = g.add(tokens, token);
    const Tensor hp = g.parameter(head);
    Tensor loss = g.crossEntropy(g.reshape(g.matmul(tokens, hp), {18, 3}), labels);
    if (twice) loss = g.add(loss, g.crossEntropy(g.reshape(g.matmul(xw, hp), {15, 3}), labels_x));
    g.markOutput(loss);
    const graph::Gradients grads = graph::backward(g, loss);
    std::pair<int, int> writes{-2, -2};
    for (const auto& node : g.nodes())
      if (node.op == OpKind::PrependTokenBackward) {
        EXPECT_EQ(writes.first, -2) << "more than one backward node";
        writes = {node.outputs[0] < 0 ? -1 : int(node.writes[0]),
                  node.outputs[1] < 0 ? -1 : int(node.writes[1])};
      }

    graph::Executor exec(ctx(), g);
    exec.setInput(x, rng_.normal(60));
    exec.setInput(cls_in, rng_.normal(6));
    exec.setInput(patches, rng_.normal(90));
    exec.setInput(labels, rng_.below(18, 3));
    exec.setInput(labels_x, rng_.below(15, 3));
    const GradCheckOptions options = lossGradCheckOptions(12);
    EXPECT_TRUE(checkParameterGradients(
        ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
        options));
    return writes;
  }
  Rng rng_;
};

constexpr int kOverwrite = int(Write::Overwrite), kAccumulate = int(Write::Accumulate);

TEST_F(GraphPrependTokenGradTest, BothGradientsInOneNode) {
  SCOPED_TRACE(rng_.describe());
  EXPECT_EQ(check(true, true, false), std::make_pair(kOverwrite, kOverwrite));
}

TEST_F(GraphPrependTokenGradTest, OnlyTheWantedGradient) {
  SCOPED_TRACE(rng_.describe());
  EXPECT_EQ(check(true, false, false), std::make_pair(kOverwrite, -1));
  EXPECT_EQ(check(false, true, false), std::make_pair(-1, kOverwrite));
}

TEST_F(GraphPrependTokenGradTest, BothGradientsAccumulate) {
  SCOPED_TRACE(rng_.describe());
  EXPECT_EQ(check(true, true, true), std::make_pair(kAccumulate, kAccumulate));
}

}  // namespace
}  // namespace vkgrad::test
