// The graph's patchify op (engine/vkgrad/runtime/ops/patchify.cpp): its shape rule and errors, and
// its backward (unpatchify) against finite differences through a compiled graph. The kernels are
// checked against the CPU reference in tests/ops/test_patchify.cpp.
#include <string>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/patchify.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;

TEST(GraphPatchifyTest, ShapesAndNamesBadShapes) {
  Graph g;
  const Tensor images = g.input("images", {2, 28, 28});
  EXPECT_EQ(g.shape(graph::patchify(g, images, 7)), (ops::Shape{2, 16, 49}));
  EXPECT_EQ(g.nodes().back().op, OpKind::Patchify);
  const size_t nodes = g.nodes().size();
  try {
    graph::patchify(g, images, 5);
    ADD_FAILURE() << "patch 5 of 28 accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("patchify: images (2,28,28) with patch 5: "),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::patchify(g, g.input("flat", {28, 28}), 7), ShapeError);
  EXPECT_THROW(graph::patchify(g, g.input("bytes", {2, 28, 28}, ops::DType::U32), 7), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphPatchifyGradTest : public VkTest {
 protected:
  Rng rng_;
};

// Learned images (2,6,12) cut two ways, into 3x3 and 2x2 patches, each projected and scored:
// the images' gradient is one unpatchify that overwrites and one that accumulates, checked
// with the projections' against central differences of the loss.
TEST_F(GraphPatchifyGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& images = store.add("images", {2, 6, 12}, Init::normal(0.0f, 1.0f));
  const auto& w3 = store.add("w3", {9, 3}, Init::xavierUniform());
  const auto& w2 = store.add("w2", {4, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor labels3 = g.input("labels3", {16}, ops::DType::U32);
  const Tensor labels2 = g.input("labels2", {36}, ops::DType::U32);
  const Tensor img = g.parameter(images);
  const Tensor p3 = graph::patchify(g, img, 3),
               p2 = graph::patchify(g, img, 2);  // (2,8,9), (2,18,4)
  const Tensor l3 = g.crossEntropy(g.reshape(g.matmul(p3, g.parameter(w3)), {16, 3}), labels3);
  const Tensor l2 = g.crossEntropy(g.reshape(g.matmul(p2, g.parameter(w2)), {36, 3}), labels2);
  const Tensor loss = g.add(l3, l2);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int overwrite = 0, accumulate = 0;
  for (const auto& node : g.nodes())
    if (node.op == OpKind::PatchifyBackward)
      (node.writes[0] == ops::Write::Overwrite ? overwrite : accumulate) += 1;
  EXPECT_EQ(overwrite, 1);
  EXPECT_EQ(accumulate, 1);

  graph::Executor exec(ctx(), g);
  exec.setInput(labels3, rng_.below(16, 3));
  exec.setInput(labels2, rng_.below(36, 3));
  const GradCheckOptions options = lossGradCheckOptions(16);
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_, options));
}

}  // namespace
}  // namespace vkgrad::test
