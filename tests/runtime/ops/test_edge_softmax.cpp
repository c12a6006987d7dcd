// The graph's edgeSoftmax (engine/vkgrad/runtime/ops/edge_softmax.cpp): its shape rule and errors,
// its output through a compiled graph against the CPU reference, two layers reading one graph's
// offsets, and the gradient of a loss through it against finite differences. The kernels
// are checked against the reference in tests/ops/test_edge_softmax.cpp.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/edge_softmax.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/edge_softmax.h"
#include "vkgrad/runtime/ops/vae_loss.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/sparse.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;

// 9 nodes, 23 edges: a self-loop (2 -> 2), a duplicate (0 -> 1 twice), node 8 with no
// incoming edges, node 4 with 6.
graph::Csr smallGraph() {
  return graph::csrFromEdges("small", 9,
                             {{0, 1}, {0, 1}, {2, 2}, {3, 1}, {1, 0}, {5, 0}, {6, 3}, {7, 3},
                              {0, 4}, {1, 4}, {2, 4}, {3, 4}, {5, 4}, {8, 4}, {4, 5}, {4, 6},
                              {6, 7}, {7, 6}, {8, 7}, {1, 2}, {3, 5}, {2, 3}, {6, 6}});
}

class GraphEdgeSoftmaxTest : public VkTest {
 protected:
  Rng rng_;
};

TEST_F(GraphEdgeSoftmaxTest, ShapesAndNamesBadShapes) {
  const graph::SparseGraph a = graph::uploadGraph(ctx(), "small", smallGraph());
  Graph g;
  const Tensor scores = g.input("scores", {23, 3});
  EXPECT_EQ(g.shape(graph::edgeSoftmax(g, a, scores)), (ops::Shape{23, 3}));
  const size_t nodes = g.nodes().size(), tensors = g.tensors().size();
  try {
    graph::edgeSoftmax(g, a, g.input("wrong", {22, 3}));
    ADD_FAILURE() << "a score per edge missing, accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("edgeSoftmax: (22,3): scores must be (edges, heads) for "
                                         "graph small (9 nodes, 23 edges)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::edgeSoftmax(g, a, g.input("flat", {23})), ShapeError);
  EXPECT_THROW(graph::edgeSoftmax(g, a, g.input("ids", {23, 2}, ops::DType::U32)), ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_EQ(g.tensors().size(), tensors + 3);  // the three inputs, nothing else
}

// Two heads and one head over the same graph: one dataset tensor for its offsets, each
// output the reference's (2e-6: tests/ops/test_edge_softmax.cpp's tolerance).
TEST_F(GraphEdgeSoftmaxTest, MatchesTheReferenceThroughAGraph) {
  SCOPED_TRACE(rng_.describe());
  const graph::Csr csr = smallGraph();
  const graph::SparseGraph a = graph::uploadGraph(ctx(), "small", csr);
  Graph g;
  const Tensor s2 = g.input("s2", {23, 2}), s1 = g.input("s1", {23, 1});
  const Tensor a2 = graph::edgeSoftmax(g, a, s2), a1 = graph::edgeSoftmax(g, a, s1);
  g.markOutput(a2);
  g.markOutput(a1);
  int datasets = 0;
  for (const graph::TensorInfo& t : g.tensors()) datasets += t.kind == graph::TensorKind::Dataset;
  EXPECT_EQ(datasets, 1);
  graph::Executor exec(ctx(), g);
  const std::vector<float> v2 = rng_.normal(46, 0.0f, 3.0f), v1 = rng_.normal(23, 0.0f, 3.0f);
  exec.setInput(s2, v2);
  exec.setInput(s1, v1);
  exec.step();
  const std::vector<float> none(46, 0.0f);
  EXPECT_TRUE(allClose(exec.read(a2), ops::ref::edgeSoftmax(csr.offsets, v2, 2, none), 2e-6));
  EXPECT_TRUE(allClose(exec.read(a1),
                       ops::ref::edgeSoftmax(csr.offsets, v1, 1, std::vector<float>(23, 0.0f)),
                       2e-6));
}

// A GAT-like head: x (9,4) -> per-edge scores (23,2) = tanh of a learned projection of x
// gathered by edge source (tanh, not GAT's leaky relu: a kink spoils finite differences), alpha =
// edgeSoftmax, twice (alpha and the softmax of 2 * scores), then loss = KL(alpha * w, 0) + KL(beta
// * w2, 0) (mean over edges of sum (alpha w)^2 / 2). Every parameter's gradient against central
// differences.
TEST_F(GraphEdgeSoftmaxTest, GradientsMatchFiniteDifferences) {
  SCOPED_TRACE(rng_.describe());
  const graph::Csr csr = smallGraph();
  const graph::SparseGraph a = graph::uploadGraph(ctx(), "small", csr);
  graph::ParameterStore store(ctx());
  const auto& x = store.add("x", {9, 4}, Init::normal(0.0f, 1.0f));
  const auto& w = store.add("w", {4, 2}, Init::normal(0.0f, 0.8f));
  store.initialize(rng_.seed());
  Graph g;
  const Tensor src = g.dataset(a.sources);
  const Tensor per_edge = g.gather(g.parameter(x), src);  // (23,4)
  const Tensor scores = g.activation(g.matmul(per_edge, g.parameter(w)), ops::Activation::Tanh);
  const Tensor alpha = graph::edgeSoftmax(g, a, scores);
  const Tensor beta = graph::edgeSoftmax(g, a, g.add(scores, scores));
  const Tensor zeros = g.constant("zeros", {23, 2}, std::vector<float>(46, 0.0f));
  const Tensor loss =
      g.add(graph::gaussianKl(
                g, g.mul(alpha, g.constant("wa", {23, 2}, rng_.normal(46, 0.0f, 2.0f))), zeros),
            graph::gaussianKl(
                g, g.mul(beta, g.constant("wb", {23, 2}, rng_.normal(46, 0.0f, 2.0f))), zeros));
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  EXPECT_TRUE(checkParameterGradients(
      ctx(), store, g, grads, exec,
      [&] {
        exec.step();
        return double(exec.readScalar(loss));
      },
      rng_, lossGradCheckOptions(16)));
}

}  // namespace
}  // namespace vkgrad::test
