// The graph's segmentPool (engine/vkgrad/runtime/ops/segment_pool.cpp): its shape rule and errors,
// its output through a compiled graph against the CPU reference with segments from a dataset, and
// the gradient of a loss through each kind against finite differences, with segments from an input.
// The kernels are checked against the reference in tests/ops/test_segment_pool.cpp.
#include <algorithm>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/segment_pool.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/segment_pool.h"
#include "vkgrad/runtime/ops/vae_loss.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;
using ops::DType;
using ops::Pool;

constexpr Pool kKinds[] = {Pool::Sum, Pool::Mean, Pool::Max};

TEST(GraphSegmentPoolTest, ShapesAndNamesBadShapes) {
  Graph g;
  const Tensor x = g.input("x", {7, 5}), segments = g.input("segments", {4}, DType::U32);
  for (Pool kind : kKinds)
    EXPECT_EQ(g.shape(graph::segmentPool(g, x, segments, kind)), (ops::Shape{3, 5}));
  const size_t nodes = g.nodes().size();
  try {
    graph::segmentPool(g, x, g.input("bad", {4, 2}, DType::U32), Pool::Max);
    ADD_FAILURE() << "2-D segments accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("segmentPool: x (7,5), segments (4,2): segments must be "
                                         "(graphs + 1) with at least one graph"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(graph::segmentPool(g, x, g.input("f32", {4}), Pool::Sum), ShapeError);
  EXPECT_THROW(graph::segmentPool(g, g.input("flat", {7}), segments, Pool::Sum), ShapeError);
  EXPECT_THROW(graph::segmentPool(g, x, g.input("no_graph", {1}, DType::U32), Pool::Mean),
               ShapeError);
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphSegmentPoolGradTest : public VkTest {
 protected:
  Rng rng_;
};

// Each kind over a dataset of segments with an empty graph, read once by all three nodes:
// the reference's values (1e-6, tests/ops/test_segment_pool.cpp's tolerance; max exact).
TEST_F(GraphSegmentPoolGradTest, MatchesTheReferenceThroughAGraph) {
  SCOPED_TRACE(rng_.describe());
  const std::vector<uint32_t> segments = {0, 4, 4, 11, 13};
  const graph::Dataset seg = graph::uploadDataset(ctx(), "segments", {5}, segments);
  Graph g;
  const Tensor x = g.input("x", {13, 3}), s = g.dataset(seg);
  std::vector<Tensor> pooled;
  for (Pool kind : kKinds) {
    pooled.push_back(graph::segmentPool(g, x, s, kind));
    g.markOutput(pooled.back());
  }
  graph::Executor exec(ctx(), g);
  const std::vector<float> values = rng_.normal(39);
  exec.setInput(x, values);
  exec.step();
  for (size_t k = 0; k < 3; ++k)
    EXPECT_TRUE(allClose(exec.read(pooled[k]),
                         ops::ref::segmentPool(kKinds[k], values, 3, segments),
                         kKinds[k] == Pool::Max ? 0.0 : 1e-6))
        << ops::poolName(kKinds[k]);
}

// x (10,3) -> loss = KL(pool(x) w, 0) + KL(pool_sum(tanh x), 0) (KL against a zero
// log sigma: the mean over graphs of sum v^2 / 2), over segments {0, 3, 3, 10} from an input
// (graph 1 empty). x reaches the loss twice, so its gradient is overwritten and then
// accumulated. x holds distinct multiples of 0.25, so the finite differences (steps of at
// most 0.04) never move a max to another node. Every parameter against central differences.
TEST_F(GraphSegmentPoolGradTest, GradientsMatchFiniteDifferences) {
  SCOPED_TRACE(rng_.describe());
  for (Pool kind : kKinds) {
    SCOPED_TRACE(ops::poolName(kind));
    graph::ParameterStore store(ctx());
    const auto& x = store.add("x", {10, 3}, Init::zeros());
    const auto& w = store.add("w", {3, 2}, Init::normal(0.0f, 0.7f));
    store.initialize(rng_.seed());
    std::vector<float> xs(30);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = 0.25f * float(i) - 3.75f;
    for (size_t i = xs.size() - 1; i > 0; --i) std::swap(xs[i], xs[rng_.below(uint32_t(i + 1))]);
    ctx().staging().upload(*x.buffer, x.offset, xs.data(), xs.size() * 4);
    Graph g;
    const Tensor segments = g.input("segments", {4}, DType::U32);
    const Tensor xi = g.parameter(x);
    const Tensor zeros3 = g.constant("zeros3", {3, 3}, std::vector<float>(9, 0.0f));
    const Tensor zeros2 = g.constant("zeros2", {3, 2}, std::vector<float>(6, 0.0f));
    const Tensor loss = g.add(
        graph::gaussianKl(g, g.matmul(graph::segmentPool(g, xi, segments, kind), g.parameter(w)),
                          zeros2),
        graph::gaussianKl(
            g, graph::segmentPool(g, g.activation(xi, ops::Activation::Tanh), segments, Pool::Sum),
            zeros3));
    g.markOutput(loss);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::Executor exec(ctx(), g);
    exec.setInput(segments, std::vector<uint32_t>{0, 3, 3, 10});
    EXPECT_TRUE(checkParameterGradients(
        ctx(), store, g, grads, exec,
        [&] {
          exec.step();
          return double(exec.readScalar(loss));
        },
        rng_, lossGradCheckOptions(16)));
  }
}

}  // namespace
}  // namespace vkgrad::test
