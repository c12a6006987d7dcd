// The graph's spmm op (engine/vkgrad/runtime/ops/spmm.cpp): its shape rule and errors, one set of
// dataset tensors however often a SparseGraph is aggregated over, and the gradients of x and
// of per-edge and per-head weights against finite differences through a compiled graph. The
// kernels are checked against the CPU reference in tests/ops/test_spmm.cpp.
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/spmm.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/sparse.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using graph::TensorKind;

class GraphSpmmTest : public VkTest {
 protected:
  // 7 nodes: a self-loop on 0, the edge 1 -> 2 twice, node 6 isolated, node 5 with only an
  // outgoing edge; 12 edges.
  graph::SparseGraph smallGraph() {
    return graph::uploadGraph(ctx(), "g",
                              graph::csrFromEdges("g", 7,
                                                  {{0, 0},
                                                   {1, 2},
                                                   {1, 2},
                                                   {2, 0},
                                                   {3, 1},
                                                   {4, 3},
                                                   {0, 4},
                                                   {2, 3},
                                                   {5, 1},
                                                   {3, 2},
                                                   {4, 4},
                                                   {1, 0}}));
  }
  Rng rng_;
};

void expectShapeError(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "no ShapeError; expected " << message;
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST_F(GraphSpmmTest, ShapesAndNamesBadShapes) {
  const graph::SparseGraph a = smallGraph();
  Graph g;
  const Tensor x = g.input("x", {7, 6});
  EXPECT_EQ(g.shape(graph::spmm(g, a, x)), (ops::Shape{7, 6}));
  EXPECT_EQ(g.nodes().back().op, OpKind::Spmm);
  EXPECT_EQ(g.shape(graph::spmm(g, a, x, g.input("w", {12}))), (ops::Shape{7, 6}));
  EXPECT_EQ(g.shape(graph::spmm(g, a, x, g.input("wh", {12, 3}))), (ops::Shape{7, 6}));
  int datasets = 0;
  for (const auto& t : g.tensors()) datasets += t.kind == TensorKind::Dataset;
  EXPECT_EQ(datasets, 6) << "three aggregations over one graph hold its six arrays once";
  const size_t nodes = g.nodes().size();
  expectShapeError(
      [&] {
        graph::spmm(g, a, g.input("x8", {8, 6}));
      },
      "spmm over graph g: x (8,6) over 7 nodes and 12 edges: x must be (7, F), one "
      "row per node");
  expectShapeError([&] { graph::spmm(g, a, x, g.input("w11", {11})); },
                   "spmm over graph g: x (7,6), weights (11) over 7 nodes and 12 edges: weights "
                   "must be (12) or (12, H), one row per edge");
  expectShapeError(
      [&] {
        graph::spmm(g, a, x, g.input("w4", {12, 4}));
      },
      "F = 6 is not a multiple of H = 4");
  expectShapeError(
      [&] {
        graph::spmm(g, a, g.input("ids", {7, 6}, ops::DType::U32));
      },
      "spmm over graph g: (7,6): x and weights must be f32");
  expectShapeError([&] { graph::spmm(g, a, x, g.input("wu", {12}, ops::DType::U32)); },
                   "x and weights must be f32");
  EXPECT_EQ(g.nodes().size(), nodes);
}

// Three aggregations over one graph: per-head weights (E, 2), per-edge weights (E) and none,
// through a gelu, then a linear head and a cross-entropy. x, both weights and the head
// against central differences: every gradient the op has (dx through the transpose, dw per
// head and per edge, and dx accumulated where h feeds two paths).
TEST_F(GraphSpmmTest, GradientsMatchFiniteDifferences) {
  SCOPED_TRACE(rng_.describe());
  const graph::SparseGraph a = smallGraph();
  graph::ParameterStore store(ctx());
  const auto& x = store.add("x", {7, 6}, Init::normal(0.0f, 1.0f));
  const auto& wh = store.add("wh", {12, 2}, Init::normal(0.0f, 0.7f));
  const auto& we = store.add("we", {12}, Init::normal(0.0f, 0.7f));
  const auto& head = store.add("head", {6, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor labels = g.input("labels", {7}, ops::DType::U32);
  const Tensor h = graph::spmm(g, a, g.parameter(x), g.parameter(wh));
  const Tensor h2 = graph::spmm(g, a, g.gelu(h), g.parameter(we));
  const Tensor h3 = g.add(graph::spmm(g, a, h2), h);  // h reaches the loss twice: dh accumulates
  const Tensor loss = g.crossEntropy(g.matmul(h3, g.parameter(head)), labels);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int backward_nodes = 0;
  for (const auto& node : g.nodes()) backward_nodes += node.op == OpKind::SpmmBackward;
  EXPECT_EQ(backward_nodes, 5);  // dx of each aggregation, dw of the two weighted ones

  graph::Executor exec(ctx(), g);
  exec.setInput(labels, rng_.below(7, 3));
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_,
      lossGradCheckOptions(24)));
}

}  // namespace
}  // namespace vkgrad::test
