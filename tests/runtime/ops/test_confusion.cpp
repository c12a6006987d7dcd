// The graph's confusion op (engine/vkgrad/runtime/ops/confusion.cpp): its shape rule (the ops
// layer's, same text), and a confusion matrix counted beside a loss in a training graph, from the
// same logits the loss sees. The kernel's rules (ties, NaN, ignored labels) are checked in
// tests/ops/test_confusion.cpp.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/confusion.h"
#include "vkgrad/ops/reference/confusion.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/confusion.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;
using ops::DType;

TEST(GraphConfusionTest, ChecksShapesWithTheOpsRule) {
  Graph g;
  const Tensor logits = g.input("logits", {3, 11, 7});
  const Tensor labels = g.input("labels", {3, 11}, DType::U32);
  const Tensor counts = graph::confusion(g, logits, labels);
  EXPECT_EQ(g.shape(counts), (ops::Shape{7, 7}));
  EXPECT_EQ(g.tensor(counts).dtype, DType::U32);
  EXPECT_FALSE(g.tensor(counts).differentiable);
  EXPECT_EQ(g.nodes().back().op, OpKind::Confusion);
  const size_t nodes = g.nodes().size();
  const Tensor flat = g.input("flat", {33}, DType::U32);
  const Tensor float_labels = g.input("float_labels", {3, 11});
  const std::vector<std::pair<Tensor, Tensor>> bad = {
      {logits, flat}, {logits, float_labels}, {labels, labels}};
  for (const auto& pair : bad) {
    const Tensor x = pair.first, y = pair.second;  // lambdas capture variables, not bindings
    EXPECT_EQ(shapeErrorText([&] { graph::confusion(g, x, y); }), shapeErrorText([&] {
                ops::confusionShape(g.shape(x), g.tensor(x).dtype, g.shape(y), g.tensor(y).dtype);
              }));
  }
  EXPECT_NE(shapeErrorText([&] { graph::confusion(g, logits, flat); }), "(no ShapeError)");
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphConfusionGpuTest : public VkTest {};

// A linear classifier's loss and its confusion matrix in one graph: autograd passes over the
// matrix (not differentiable, not on the loss's path), and each step counts anew from the
// step's logits (read back here), exactly as the CPU reference counts them.
TEST_F(GraphConfusionGpuTest, CountsEachStepsLogitsBesideALoss) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t rows = 45, features = 6, classes = 5;
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {features, classes}, graph::Init::xavierUniform());
  store.initialize(rng.seed());
  Graph g;
  const Tensor x = g.input("x", {rows, features});
  const Tensor labels = g.input("labels", {rows}, DType::U32);
  const Tensor logits = g.matmul(x, g.parameter(w));
  const Tensor loss = g.crossEntropy(logits, labels);
  const Tensor counts = graph::confusion(g, logits, labels);
  g.markOutput(loss);
  g.markOutput(logits);
  g.markOutput(counts);
  graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  for (int step = 0; step < 2; ++step) {
    const auto step_labels = rng.below(size_t(rows), uint32_t(classes));
    exec.setInput(x, rng.normal(size_t(rows * features)));
    exec.setInput(labels, step_labels);
    exec.step();
    const auto got_logits = exec.read(logits);
    std::vector<uint32_t> want(size_t(classes * classes));
    ops::ref::confusion(got_logits.data(), step_labels.data(), want.data(), rows, classes, false);
    EXPECT_EQ(exec.readWords(counts), want) << "step " << step;
  }
}

}  // namespace
}  // namespace vkgrad::test
