// Attention and trainable embeddings in the graph: gradients of small composite graphs
// (layerNorm + attention + residual, fused or separate projections, a tied embedding) against
// finite differences of the loss the executor computes, and autograd from a given output
// gradient.
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/gradcheck.h"
#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "runtime/attention_graph_check.h"
#include "runtime/transformer_block.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using ops::Write;

using AttentionGraphTest = AttentionGraphFixture;

// x (2,5,8) -> layerNorm -> fused QKV projection (8 -> 24) -> causal attention with 2 heads of
// 4, read in place from the projection -> output projection -> + x -> head -> cross-entropy.
TEST_F(AttentionGraphTest, LayerNormFusedAttentionResidualMatchesFiniteDifferences) {
  graph::ParameterStore store(ctx());
  store.add("ln.g", {8}, Init::uniform(0.5f, 1.5f));
  store.add("ln.b", {8}, Init::uniform(-0.5f, 0.5f));
  store.add("qkv.w", {8, 24}, Init::xavierUniform());
  store.add("qkv.b", {24}, Init::uniform(-0.5f, 0.5f));
  store.add("proj.w", {8, 8}, Init::xavierUniform());
  store.add("head", {8, 5}, Init::xavierUniform());
  store.initialize(rng_.seed());
  Graph g;
  auto p = [&](const char* name) { return g.parameter(store.at(name)); };
  const Tensor x = g.input("x", {2, 5, 8});
  const Tensor y = g.input("y", {2, 5}, ops::DType::U32);
  const Tensor qkv = g.matmul(g.layerNorm(x, p("ln.g"), p("ln.b")), p("qkv.w"), p("qkv.b"));
  const Tensor a = g.attention(qkv, 2, /*causal=*/true);
  EXPECT_EQ(g.shape(a), (ops::Shape{2, 5, 8}));
  const Tensor r = g.add(x, g.matmul(a, p("proj.w")));
  const Tensor loss = g.crossEntropy(g.matmul(r, p("head")), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);

  // One backward kernel writes q's, k's and v's gradients into the projection's gradient.
  int attention_backward = 0;
  for (const auto& node : g.nodes()) {
    if (node.op != OpKind::AttentionBackward) continue;
    ++attention_backward;
    EXPECT_EQ(node.outputs[0], grads[qkv].id);
    EXPECT_EQ(node.outputs[1], grads[qkv].id);
    EXPECT_EQ(node.outputs[2], grads[qkv].id);
  }
  EXPECT_EQ(attention_backward, 1);

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(80));
  exec.setInput(y, rng_.below(10, 5));
  checkAllParameters(store, g, grads, exec, [&] { return double(exec.readScalar(loss)); });
}

// Cross-attention from separate projections: queries from x (2,3,..), keys and values from m
// (2,6,..), reshaped to (B,T,H,D) without copies; no mask, an explicit scale.
TEST_F(AttentionGraphTest, SeparateProjectionsMatchFiniteDifferences) {
  checkSeparateProjections(ctx(), rng_, {2, 3, 6, 3, 3, 2, 5, 4, 3, 0.8f}, rng_.seed() + 1);
}

// q = k = v = one tensor: the kernel cannot write one gradient three times, so k's and v's
// parts go through temporaries that are added in after it.
TEST_F(AttentionGraphTest, OneTensorAsQueryKeyAndValueAccumulates) {
  graph::ParameterStore store(ctx());
  store.add("w", {4, 8}, Init::xavierUniform());
  store.add("head", {8, 3}, Init::xavierUniform());
  store.initialize(rng_.seed() + 2);
  Graph g;
  const Tensor x = g.input("x", {1, 7, 4});
  const Tensor y = g.input("y", {1, 7}, ops::DType::U32);
  const Tensor h = g.reshape(g.matmul(x, g.parameter(store.at("w"))), {1, 7, 2, 4});
  const Tensor o = g.reshape(g.attention(h, h, h, true), {1, 7, 8});
  const Tensor loss = g.crossEntropy(g.matmul(o, g.parameter(store.at("head"))), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  std::vector<Write> modes;
  const int root = g.tensor(grads[h]).root;
  for (const auto& node : g.nodes())
    if (!node.isView() && !node.outputs.empty() && node.outputs[0] >= 0 &&
        g.tensor(node.outputs[0]).root == root)
      modes.push_back(node.writes[0]);
  EXPECT_EQ(modes, (std::vector<Write>{Write::Overwrite, Write::Accumulate, Write::Accumulate}));
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(28));
  exec.setInput(y, rng_.below(7, 3));
  checkAllParameters(store, g, grads, exec, [&] { return double(exec.readScalar(loss)); });
}

// A trainable embedding tied to the output head: the table's gradient gets the head's
// contribution (first, overwriting) and the gather's scatter-add (accumulating). Ids repeat,
// and some rows are never looked up.
TEST_F(AttentionGraphTest, TiedTrainableEmbeddingMatchesFiniteDifferences) {
  graph::ParameterStore store(ctx());
  store.add("table", {7, 4}, Init::normal(0.0f, 1.0f));
  store.add("w", {4, 4}, Init::xavierUniform());
  store.initialize(rng_.seed() + 3);
  Graph g;
  const Tensor table = g.parameter(store.at("table"));
  const Tensor ids = g.input("ids", {2, 5}, ops::DType::U32);
  const Tensor y = g.input("y", {2, 5}, ops::DType::U32);
  const Tensor h = g.activation(g.matmul(g.gather(table, ids), g.parameter(store.at("w"))),
                                ops::Activation::Tanh);
  const Tensor loss = g.crossEntropy(g.matmul(h, table, {}, false, true), y);  // (2,5,7)
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int gather_backward = 0;
  for (const auto& node : g.nodes())
    if (node.op == OpKind::GatherBackward) {
      ++gather_backward;
      EXPECT_EQ(node.outputs[0], grads[table].id);
      EXPECT_EQ(node.writes[0], Write::Accumulate);
    }
  EXPECT_EQ(gather_backward, 1);
  graph::Executor exec(ctx(), g);
  exec.setInput(ids, std::vector<uint32_t>{0, 2, 2, 5, 0, 6, 2, 1, 5, 5});
  exec.setInput(y, rng_.below(10, 7));
  checkAllParameters(store, g, grads, exec, [&] { return double(exec.readScalar(loss)); });
}

// An embedding alone: rows no id picks get exactly zero, a row picked twice the sum.
TEST_F(AttentionGraphTest, EmbeddingGradientSumsRowsPerIdAndZeroesTheRest) {
  graph::ParameterStore store(ctx());
  store.add("table", {5, 3}, Init::normal(0.0f, 1.0f));
  store.initialize(rng_.seed() + 4);
  Graph g;
  const Tensor table = g.parameter(store.at("table"));
  const Tensor ids = g.input("ids", {4}, ops::DType::U32);
  const Tensor rows = g.gather(table, ids);  // (4,3)
  const Tensor dout = g.input("dout", {4, 3});
  const graph::Gradients grads = graph::backward(g, rows, dout);
  graph::Executor exec(ctx(), g);
  exec.setInput(ids, std::vector<uint32_t>{3, 1, 3, 0});
  const std::vector<float> d = rng_.normal(12);
  exec.setInput(dout, d);
  exec.step();
  const std::vector<float> dt = exec.read(grads[table]);
  for (size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(dt[0 * 3 + c], d[3 * 3 + c]);
    EXPECT_EQ(dt[1 * 3 + c], d[1 * 3 + c]);
    EXPECT_EQ(dt[2 * 3 + c], 0.0f);
    EXPECT_FLOAT_EQ(dt[3 * 3 + c], d[0 * 3 + c] + d[2 * 3 + c]);
    EXPECT_EQ(dt[4 * 3 + c], 0.0f);
  }
}

// Autograd from a given gradient of a non-scalar output (a reshape of what a node wrote):
// the parameters' gradients are those of sum(output ∘ dout), checked by finite differences.
TEST_F(AttentionGraphTest, BackwardFromAGivenOutputGradientMatchesFiniteDifferences) {
  graph::ParameterStore store(ctx());
  store.add("ln.g", {6}, Init::uniform(0.5f, 1.5f));
  store.add("ln.b", {6}, Init::uniform(-0.5f, 0.5f));
  store.add("qkv.w", {6, 18}, Init::xavierUniform());
  store.initialize(rng_.seed() + 5);
  Graph g;
  auto p = [&](const char* name) { return g.parameter(store.at(name)); };
  const Tensor x = g.input("x", {2, 4, 6});
  const Tensor qkv = g.matmul(g.layerNorm(x, p("ln.g"), p("ln.b")), p("qkv.w"));
  const Tensor out = g.reshape(g.add(x, g.attention(qkv, 3, true)), {8, 6});
  const Tensor dout = g.input("dout", {8, 6});
  g.markOutput(out);
  const graph::Gradients grads = graph::backward(g, out, dout);
  EXPECT_EQ(grads.loss, out);
  EXPECT_EQ(grads.parameters.size(), 3u);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(48));
  const std::vector<float> weights = rng_.normal(48);
  exec.setInput(dout, weights);
  checkAllParameters(store, g, grads, exec, [&] { return weightedSum(exec.read(out), weights); });
}

// The transformer block's gradients (attention and embedding backward included) are the same
// bits when the step is replayed and when it is recorded afresh: no float atomics anywhere.
TEST_F(AttentionGraphTest, TransformerBlockGradientsAreBitIdenticalAcrossReplayAndRerecord) {
  graph::ParameterStore store(ctx());
  const TinyTransformer config;
  addTransformerParameters(store, config);
  store.initialize(rng_.seed() + 6);
  Graph g;
  const Tensor ids = g.input("ids", {2, config.seq}, ops::DType::U32);
  const Tensor targets = g.input("targets", {2, config.seq}, ops::DType::U32);
  const Tensor loss = transformerLoss(g, store, config, ids, targets);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(ids, rng_.below(size_t(2 * config.seq), uint32_t(config.vocab)));
  exec.setInput(targets, rng_.below(size_t(2 * config.seq), uint32_t(config.vocab)));
  auto run = [&] {
    exec.step();
    std::vector<float> all = exec.read(loss);
    for (const auto& [param, grad] : grads.parameters) {
      const std::vector<float> d = exec.read(grad);
      all.insert(all.end(), d.begin(), d.end());
    }
    return all;
  };
  const std::vector<float> first = run(), replayed = run();
  exec.rerecord();
  const std::vector<float> rerecorded = run();
  ASSERT_EQ(first.size(), replayed.size());
  ASSERT_EQ(first.size(), rerecorded.size());
  EXPECT_EQ(std::memcmp(first.data(), replayed.data(), first.size() * 4), 0);
  EXPECT_EQ(std::memcmp(first.data(), rerecorded.data(), first.size() * 4), 0);
  for (float v : first) ASSERT_TRUE(std::isfinite(v));
}

TEST_F(AttentionGraphTest, RejectsBadShapesAndBadOutputGradients) {
  graph::ParameterStore store(ctx());
  Graph g;
  const Tensor q = g.input("q", {2, 3, 2, 4}), k = g.input("k", {2, 5, 2, 4});
  const size_t nodes = g.nodes().size();
  try {
    g.attention(q, k, g.input("v", {2, 5, 2, 3}));
    FAIL() << "mismatched v accepted";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("attention: v (2,5,2,3) must be (2,5,2,4) (B,T,H,D)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(g.attention(q, g.input("k2", {2, 5, 3, 4}), g.input("v2", {2, 5, 3, 4})),
               ShapeError);
  EXPECT_THROW(g.attention(g.input("qkv", {2, 3, 20}), 3), ShapeError);  // 20 % 9 != 0
  const Tensor q3 = g.input("q3", {2, 3, 8});
  EXPECT_THROW(g.attention(q3, q3, q3), ShapeError);  // (B,T,H,D) or a fused (B,T,3HD)
  EXPECT_EQ(g.nodes().size(), nodes);

  const Tensor w = g.parameter(store.add("w", {4, 4}, Init::ones()));
  const Tensor h = g.matmul(g.input("x", {3, 4}), w);
  EXPECT_THROW(graph::backward(g, h, g.input("d", {4, 3})), ShapeError);
  EXPECT_THROW(graph::backward(g, g.slice(h, 0, 2), g.input("d2", {2, 4})), Error);
}

}  // namespace
}  // namespace vkgrad::test
