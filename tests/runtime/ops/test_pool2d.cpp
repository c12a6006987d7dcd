// The graph's maxPool2d and avgPool2d ops (engine/vkgrad/runtime/ops/pool2d.cpp): shapes and
// errors, and their backward passes against finite differences through a compiled graph. The
// kernels are checked against the CPU reference in tests/ops/test_pool2d.cpp.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/ops/pool2d.h"
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
using ops::Pool2dParams;

TEST(GraphPool2dTest, ShapesAndBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {2, 3, 28, 28});
  EXPECT_EQ(g.shape(g.maxPool2d(x, Pool2dParams::square(2))), (ops::Shape{2, 3, 14, 14}));
  EXPECT_EQ(g.nodes().back().op, OpKind::MaxPool2d);
  EXPECT_EQ(g.tensor(g.nodes().back().outputs[1]).dtype, ops::DType::U32);  // the argmax
  EXPECT_EQ(g.shape(g.avgPool2d(x, Pool2dParams::square(3, 2, 1))), (ops::Shape{2, 3, 14, 14}));
  const size_t nodes = g.nodes().size();
  try {
    g.maxPool2d(x, Pool2dParams::square(2, 2, 2));
    ADD_FAILURE() << "padding 2 of a 2x2 window accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("maxPool2d: x (2,3,28,28) kernel 2x2 stride 2x2 pad 2x2: "),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.avgPool2d(g.input("flat", {3, 28, 28}), Pool2dParams::square(2)), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphPool2dGradTest : public VkTest {
 protected:
  Rng rng_;
};

// Learned images max-pooled (overlapping padded 3x3 windows, stride 2) and average-pooled
// (2x2 windows with count_include_pad off, padded) into two linear heads. The images are a
// shuffled ladder of values 1/30 apart, so no finite-difference step (1e-2) changes which
// pixel a window chooses: the max is smooth where it is checked.
TEST_F(GraphPool2dGradTest, GradientsMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& images = store.add("images", {1, 2, 5, 6}, Init::normal(0.0f, 1.0f));
  const auto& h1 = store.add("h1", {2 * 3 * 3, 3}, Init::xavierUniform());
  const auto& h2 = store.add("h2", {2 * 3 * 4, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());
  std::vector<graph::SavedTensor> saved = store.download();
  for (graph::SavedTensor& t : saved) {
    if (t.name != "images") continue;
    std::vector<float> ladder(t.data.size());
    std::iota(ladder.begin(), ladder.end(), 0.0f);
    for (size_t i = ladder.size() - 1; i > 0; --i)
      std::swap(ladder[i], ladder[rng_.below(uint32_t(i + 1))]);
    for (size_t i = 0; i < ladder.size(); ++i) {
      const float v = ladder[i] / 30.0f - 1.0f;
      std::memcpy(&t.data[i], &v, 4);
    }
  }
  std::vector<const graph::SavedTensor*> all;
  for (const auto& t : saved) all.push_back(&t);
  store.upload(all, "ladder");

  Graph g;
  const Tensor labels = g.input("labels", {1}, ops::DType::U32);
  const Tensor x = g.parameter(images);
  const Tensor mx = g.maxPool2d(x, Pool2dParams::square(3, 2, 1));  // (1,2,3,3)
  const Tensor av = g.avgPool2d(x, {2, 2, 2, 2, 1, 1, false});      // (1,2,3,4)
  const Tensor l1 = g.crossEntropy(g.matmul(g.reshape(mx, {1, 18}), g.parameter(h1)), labels);
  const Tensor l2 = g.crossEntropy(g.matmul(g.reshape(av, {1, 24}), g.parameter(h2)), labels);
  const Tensor loss = g.add(l1, l2);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);

  graph::Executor exec(ctx(), g);
  exec.setInput(labels, rng_.below(1, 3));
  const GradCheckOptions options = lossGradCheckOptions(30);
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_, options));
}

}  // namespace
}  // namespace vkgrad::test
