#include "vkgrad/runtime/graph.h"

#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"

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
  const Tensor ln = g.layerNorm(act, b, b);
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
      g, [&] { g.matmul(a, b); }, "matmul: (4,8) x (9,2): inner dims differ (8 vs 9)");
  expectBuildError(
      g, [&] { g.matmul(a, c, bias3); }, "matmul: (4,8) x (8,2): bias (3) must be (2)");
  expectBuildError(
      g, [&] { g.matmul(v, c); }, "2-D or 3-D");
  expectBuildError(
      g, [&] { g.matmul(p, q); }, "batch dims differ");
  expectBuildError(
      g, [&] { g.matmul(a, ids); }, "f32");
}

TEST(GraphTest, OtherShapeErrors) {
  Graph g;
  const Tensor x = g.input("x", {3, 4}), b3 = g.input("b", {3});
  const Tensor v4 = g.input("v4", {4}), v5 = g.input("v5", {5});
  const Tensor t_f32 = g.input("t", {3}), t_wrong = g.input("t", {4}, ops::DType::U32);
  expectBuildError(
      g, [&] { g.add(x, b3); }, "add: (3,4) and (3) do not broadcast");
  expectBuildError(
      g, [&] { g.layerNorm(x, v5, v4); }, "layerNorm: x (3,4) needs gamma (4), got (5)");
  expectBuildError(
      g, [&] { g.crossEntropy(x, t_f32); },
      "crossEntropy: logits (3,4), targets (3): targets must be u32");
  expectBuildError(
      g, [&] { g.crossEntropy(x, t_wrong); }, "targets must have the shape of logits without C");
  expectBuildError(
      g,
      [&] {
        g.reshape(x, {5, 2});
      },
      "reshape: (3,4) -> (5,2)");
  EXPECT_THROW(g.constant("c", {2, 2}, {1, 2, 3}), ShapeError);
  EXPECT_THROW(g.relu(Tensor{1000}), Error);
}

// Slices and their reshapes are views: one root, a byte offset, a node that records no kernel.
TEST(GraphTest, SlicesAreViewsAtAnOffset) {
  Graph g;
  const Tensor x = g.input("x", {6, 2, 5});
  const Tensor s = g.slice(x, 2, 5);
  EXPECT_EQ(g.shape(s), (ops::Shape{3, 2, 5}));
  EXPECT_EQ(g.tensor(s).root, x.id);
  EXPECT_EQ(g.tensor(s).offset, 2u * 10 * 4);
  EXPECT_TRUE(g.nodes().back().isView());
  // A slice of a reshaped slice adds up the offsets.
  const Tensor inner = g.slice(g.reshape(s, {6, 5}), 1, 2);
  EXPECT_EQ(g.shape(inner), (ops::Shape{1, 5}));
  EXPECT_EQ(g.tensor(inner).offset, (2u * 10 + 5) * 4);
  EXPECT_EQ(g.tensor(inner).root, x.id);
  expectBuildError(
      g, [&] { g.slice(x, 4, 4); }, "slice: (6,2,5) [4, 4)");
  expectBuildError(
      g, [&] { g.slice(x, -1, 2); }, "0 <= begin < end <= 6");
  expectBuildError(
      g, [&] { g.slice(x, 0, 7); }, "0 <= begin < end <= 6");
}

TEST(GraphTest, GatherTakesTheTablesRowShapeAndChecksIds) {
  Graph g;
  const Tensor table = g.input("table", {10, 3, 4});
  const Tensor labels = g.input("labels", {10}, ops::DType::U32);
  const Tensor ids = g.input("ids", {2, 5}, ops::DType::U32);
  const Tensor rows = g.gather(table, ids);
  EXPECT_EQ(g.shape(rows), (ops::Shape{2, 5, 3, 4}));
  EXPECT_EQ(g.tensor(rows).dtype, ops::DType::F32);
  EXPECT_EQ(g.nodes().back().op, OpKind::Gather);
  const Tensor picked = g.gather(labels, g.input("batch", {7}, ops::DType::U32));
  EXPECT_EQ(g.shape(picked), (ops::Shape{7}));
  EXPECT_EQ(g.tensor(picked).dtype, ops::DType::U32);
  EXPECT_FALSE(g.tensor(picked).differentiable);
  const Tensor f32_ids = g.input("f", {4});
  expectBuildError(
      g, [&] { g.gather(table, f32_ids); }, "gather: table (10,3,4), ids (4): ids must be u32");
  const Tensor ids5 = g.input("ids5", {2, 2, 2, 2, 2}, ops::DType::U32);
  expectBuildError(
      g, [&] { g.gather(table, ids5); }, "more than 6 dims");
}

class GraphParameterTest : public VkTest {};

TEST_F(GraphParameterTest, DatasetsAreReadInPlaceAndNeverDifferentiable) {
  const std::vector<uint32_t> labels{3, 1, 4, 1, 5};
  const graph::Dataset d = graph::uploadDataset(ctx(), "labels", {5}, labels);
  EXPECT_EQ(d.dtype, ops::DType::U32);
  EXPECT_THROW(graph::uploadDataset(ctx(), "bad", {2, 3}, std::vector<float>(5)), ShapeError);
  Graph g;
  const Tensor t = g.dataset(d);
  EXPECT_EQ(g.tensor(t).kind, TensorKind::Dataset);
  EXPECT_EQ(g.tensor(t).dataset, &d);
  EXPECT_EQ(g.tensor(t).name, "labels");
  EXPECT_FALSE(g.tensor(t).differentiable);
  const size_t tensors = g.tensors().size();
  EXPECT_EQ(g.dataset(d), t);  // the same dataset is the same tensor, not a second one
  EXPECT_EQ(g.tensors().size(), tensors);
  graph::Dataset empty{"empty", {4}, ops::DType::F32, {}};
  EXPECT_THROW(g.dataset(empty), ShapeError);
}

TEST_F(GraphParameterTest, ParametersComeFromAStoreOnce) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {3, 2}, graph::Init::ones());
  Graph g;
  const Tensor t = g.parameter(w);
  EXPECT_EQ(g.tensor(t).kind, TensorKind::Parameter);
  EXPECT_EQ(g.tensor(t).parameter, &w);
  EXPECT_EQ(g.tensor(t).name, "w");
  EXPECT_EQ(g.shape(t), (ops::Shape{3, 2}));
  // Asked again (a model built twice into one graph: the Trainer's micro-batches), the same
  // tensor: a second handle would split its gradient.
  const size_t tensors = g.tensors().size();
  EXPECT_EQ(g.parameter(w), t);
  EXPECT_EQ(g.tensors().size(), tensors);
}

}  // namespace
}  // namespace vkgrad::test
