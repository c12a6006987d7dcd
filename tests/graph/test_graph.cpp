#include "graph/graph.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "common/vk_test.h"
#include "graph/parameters.h"
#include "vk/error.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;
using graph::TensorKind;

// build() must throw ShapeError containing `message` and add no node or tensor.
void expectBuildError(Graph& g, const std::function<void()>& build, const std::string& message) {
  const size_t nodes = g.nodes().size(), tensors = g.tensors().size();
  try {
    build();
    ADD_FAILURE() << "no ShapeError; expected: " << message;
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_EQ(g.tensors().size(), tensors);
}

TEST(GraphTest, OpsInferShapesAndRecordNodes) {
  Graph g;
  const Tensor x = g.input("x", {2, 3, 4});
  const Tensor w = g.constant("w", {4, 5}, std::vector<float>(20, 0.5f));
  const Tensor b = g.constant("b", {5}, std::vector<float>(5, 1.0f));
  const Tensor h = g.matmul(x, w, b);
  EXPECT_EQ(g.shape(h), (ops::Shape{2, 3, 5}));
  // a stored (K,M) = (4,7) and used transposed.
  EXPECT_EQ(g.shape(g.matmul(g.input("a", {4, 7}), w, {}, true, false)), (ops::Shape{7, 5}));
  const Tensor act = g.gelu(h);
  EXPECT_EQ(g.shape(act), (ops::Shape{2, 3, 5}));
  const Tensor ln = g.layernorm(act, b, b);
  EXPECT_EQ(g.shape(ln), (ops::Shape{2, 3, 5}));
  // add broadcasts its smaller operand, whichever side it is on.
  const Tensor sum = g.add(b, ln);
  EXPECT_EQ(g.shape(sum), (ops::Shape{2, 3, 5}));
  EXPECT_EQ(g.nodes().back().op, OpKind::Add);
  EXPECT_EQ(g.nodes().back().inputs, (std::vector<int>{ln.id, b.id}));
  const Tensor flat = g.reshape(sum, {6, 5});
  EXPECT_EQ(g.tensor(flat).root, g.tensor(sum).root);
  const Tensor loss = g.crossEntropy(flat, g.input("y", {6}, ops::DType::U32));
  EXPECT_EQ(g.shape(loss), (ops::Shape{1}));
  EXPECT_EQ(g.producer(loss.id), int(g.nodes().size()) - 1);
  EXPECT_EQ(g.tensor(x).kind, TensorKind::Input);
  EXPECT_FALSE(g.tensor(x).differentiable);
  EXPECT_EQ(g.tensor(w).kind, TensorKind::Constant);
  g.markOutput(loss);
  g.markOutput(loss);
  EXPECT_EQ(g.outputs(), (std::vector<int>{loss.id}));
}

TEST(GraphTest, MatmulShapeErrorsNameTheShapes) {
  Graph g;
  const Tensor a = g.input("a", {4, 8}), b = g.input("b", {9, 2}), c = g.input("c", {8, 2});
  const Tensor bias3 = g.input("bias", {3}), v = g.input("v", {8});
  const Tensor p = g.input("p", {2, 4, 8}), q = g.input("q", {3, 8, 2});
  const Tensor ids = g.input("i", {8, 2}, ops::DType::U32);
  expectBuildError(
      g, [&] { g.matmul(a, b); }, "matmul: (4,8), (9,2): inner dims differ (8 vs 9)");
  expectBuildError(
      g, [&] { g.matmul(a, c, bias3); }, "bias must be (2)");
  expectBuildError(
      g, [&] { g.matmul(v, c); }, "2-D or 3-D");
  expectBuildError(
      g, [&] { g.matmul(p, q); }, "batch sizes differ");
  expectBuildError(
      g, [&] { g.matmul(a, ids); }, "f32");
}

TEST(GraphTest, OtherShapeErrors) {
  Graph g;
  const Tensor x = g.input("x", {3, 4}), b3 = g.input("b", {3});
  const Tensor v4 = g.input("v4", {4}), v5 = g.input("v5", {5});
  const Tensor t_f32 = g.input("t", {3}), t_wrong = g.input("t", {4}, ops::DType::U32);
  expectBuildError(
      g, [&] { g.add(x, b3); }, "add: a (3,4), b (3)");
  expectBuildError(
      g, [&] { g.layernorm(x, v5, v4); }, "gamma and beta must be (4)");
  expectBuildError(
      g, [&] { g.crossEntropy(x, t_f32); }, "targets u32");
  expectBuildError(
      g, [&] { g.crossEntropy(x, t_wrong); }, "targets must be (3)");
  expectBuildError(
      g,
      [&] {
        g.reshape(x, {5, 2});
      },
      "reshape: (3,4) -> (5,2)");
  EXPECT_THROW(g.constant("c", {2, 2}, {1, 2, 3}), ShapeError);
  EXPECT_THROW(g.relu(Tensor{1000}), Error);
}

class GraphParameterTest : public VkTest {};

TEST_F(GraphParameterTest, ParametersComeFromAStoreOnce) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {3, 2}, graph::Init::ones());
  Graph g;
  const Tensor t = g.parameter(w);
  EXPECT_EQ(g.tensor(t).kind, TensorKind::Parameter);
  EXPECT_EQ(g.tensor(t).parameter, &w);
  EXPECT_EQ(g.tensor(t).name, "w");
  EXPECT_EQ(g.shape(t), (ops::Shape{3, 2}));
  EXPECT_THROW(g.parameter(w), Error);  // a second handle would split its gradient
}

}  // namespace
}  // namespace vkgrad::test
