// Grouped-query attention in the graph (Graph::attention with k, v of fewer heads, its fused
// (B,T,(H+2*Hkv)*D) form, and Graph::cachedAttention with (B,rows,Hkv*D) caches): the fused
// layout and its one gradient against the fp64 repeat_kv reference, parameter gradients
// against finite differences, cached decoding against the full causal attention row by row,
// and the refusals.
#include <algorithm>
#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/expect.h"
#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/attention_check.h"
#include "runtime/attention_graph_check.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;

// fp32 kernels against the fp64 reference, as tests/ops/test_attention.cpp.
constexpr double kTolerance = 2e-5;

using AttentionGqaGraphTest = AttentionGraphFixture;

// qkv (1,13,(6+2*2)*8), each row [6 q heads | 2 k heads | 2 v heads], as a parameter: o and
// the one gradient of sum(o ∘ dout) (q's, k's and v's blocks side by side) against the
// reference, causal and not.
TEST_F(AttentionGqaGraphTest, FusedLayoutAndItsGradientMatchTheReference) {
  const int64_t t = 13, h = 6, hkv = 2, d = 8, width = (h + 2 * hkv) * d;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    graph::ParameterStore store(ctx());
    store.add("qkv", {1, t, width}, Init::normal(0.0f, 1.0f));
    store.initialize(rng_.seed() + (causal ? 1 : 0));
    Graph g;
    const Tensor qkv = g.parameter(store.at("qkv"));
    const Tensor o = g.attention(qkv, h, hkv, causal);
    EXPECT_EQ(g.shape(o), (ops::Shape{1, t, h * d}));
    const Tensor dout = g.input("dout", {1, t, h * d});
    g.markOutput(o);
    const graph::Gradients grads = graph::backward(g, o, dout);
    int attention_backward = 0;
    for (const auto& node : g.nodes())
      if (node.op == OpKind::AttentionBackward) {
        ++attention_backward;
        for (int i = 0; i < 3; ++i) EXPECT_EQ(node.outputs[size_t(i)], grads[qkv].id);
      }
    EXPECT_EQ(attention_backward, 1);
    graph::Executor exec(ctx(), g);
    const std::vector<float> dd = rng_.normal(size_t(t * h * d));
    exec.setInput(dout, dd);
    exec.step();
    const std::vector<float> x = exec.read(qkv);

    ops::ref::AttentionShape s{1, h, t, t, d, causal};
    s.hkv = hkv;
    s.q_stride = s.k_stride = s.v_stride = width;
    s.o_stride = h * d;
    std::vector<float> want(size_t(t * h * d)), lse(size_t(h * t)), dx(x.size());
    const float *q = x.data(), *k = q + h * d, *v = k + hkv * d;
    ops::ref::attention(s, q, k, v, want.data(), lse.data());
    ops::ref::attentionBackward(s, q, k, v, dd.data(), dx.data(), dx.data() + h * d,
                                dx.data() + (h + hkv) * d);
    EXPECT_TRUE(allClose(exec.read(o), want, kTolerance)) << "o";
    EXPECT_TRUE(allCloseOnScale(exec.read(grads[qkv]), dx, maxAbs(dx), kTolerance)) << "dqkv";
  }
}

// x (2,5,6) -> fused projection (6 -> (4+2*2)*3) -> causal attention with 4 query heads of 3
// sharing 2 key/value heads -> head -> cross-entropy: every parameter against finite
// differences (D = 3: the shared-memory kernels).
TEST_F(AttentionGqaGraphTest, FusedProjectionMatchesFiniteDifferences) {
  graph::ParameterStore store(ctx());
  store.add("qkv.w", {6, 24}, Init::xavierUniform());
  store.add("qkv.b", {24}, Init::uniform(-0.5f, 0.5f));
  store.add("head", {12, 5}, Init::xavierUniform());
  store.initialize(rng_.seed() + 2);
  Graph g;
  auto p = [&](const char* name) { return g.parameter(store.at(name)); };
  const Tensor x = g.input("x", {2, 5, 6});
  const Tensor y = g.input("y", {2, 5}, ops::DType::U32);
  const Tensor a = g.attention(g.matmul(x, p("qkv.w"), p("qkv.b")), 4, 2, /*causal=*/true);
  const Tensor loss = g.crossEntropy(g.matmul(a, p("head")), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(60));
  exec.setInput(y, rng_.below(10, 5));
  checkAllParameters(store, g, grads, exec, [&] { return double(exec.readScalar(loss)); });
}

// Separate projections, cross-attention: q (2,3,6,4) from x, k and v (2,7,2,4) from m, an
// explicit scale; q's, k's and v's weights against finite differences (D = 4: the texel
// kernels on lavapipe).
TEST_F(AttentionGqaGraphTest, SeparateProjectionsMatchFiniteDifferences) {
  checkSeparateProjections(ctx(), rng_, {2, 3, 7, 6, 2, 4, 5, 4, 3, 0.7f}, rng_.seed() + 3);
}

// Decoding one row at a time over (1,rows,Hkv*D) caches gives, row by row, what causal
// attention over the whole sequence gives (H = 6, Hkv = 2, D = 5).
TEST_F(AttentionGqaGraphTest, CachedDecodingMatchesFullCausalAttentionRowByRow) {
  const int64_t t = 9, rows = 12, h = 6, hkv = 2, d = 5, width = (h + 2 * hkv) * d;
  const std::vector<float> all = rng_.normal(size_t(t * width));

  Graph full;
  const Tensor x = full.input("qkv", {1, t, width});
  const Tensor whole = full.attention(x, h, hkv, /*causal=*/true);
  full.markOutput(whole);
  graph::Executor full_exec(ctx(), full);
  full_exec.setInput(x, all);
  full_exec.step();
  const std::vector<float> want = full_exec.read(whole);

  Graph g;
  const Tensor row = g.input("row", {1, 1, width});
  const Tensor kc = g.input("k_cache", {1, rows, hkv * d}),
               vc = g.input("v_cache", {1, rows, hkv * d});
  const Tensor position = g.input("position", {1}, ops::DType::U32);
  const Tensor o = g.cachedAttention(row, h, hkv, kc, vc, position);
  EXPECT_EQ(g.shape(o), (ops::Shape{1, 1, h * d}));
  g.markOutput(o);
  graph::Executor exec(ctx(), g);
  // Rows past the position are never read: random, not zeros, so a wrong read shows.
  exec.setInput(kc, rng_.normal(size_t(rows * hkv * d)));
  exec.setInput(vc, rng_.normal(size_t(rows * hkv * d)));
  for (int64_t i = 0; i < t; ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    exec.setInput(row, std::span(all).subspan(size_t(i * width), size_t(width)));
    exec.setInput(position, std::vector<uint32_t>{uint32_t(i)});
    exec.step();
    const std::vector<float> got = exec.read(o);
    const std::vector<float> expected(want.begin() + i * h * d, want.begin() + (i + 1) * h * d);
    EXPECT_TRUE(allClose(got, expected, kTolerance));
  }
}

TEST_F(AttentionGqaGraphTest, RefusesHeadCountsThatDoNotDivide) {
  Graph g;
  const Tensor qkv = g.input("qkv", {2, 3, 56});  // (6 + 2*4) * 4
  const size_t nodes = g.nodes().size();
  auto expectMessage = [](const auto& f, const std::string& text) {
    try {
      f();
      ADD_FAILURE() << "accepted: " << text;
    } catch (const ShapeError& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expectMessage([&] { g.attention(qkv, 6, 4, true); },
                "attention: (2,3,56) with 6 heads and 4 key/value heads: the key/value heads "
                "must divide the query heads");
  expectMessage([&] { g.attention(qkv, 6, 3, true); },
                "attention: (2,3,56) with 6 heads and 3 key/value heads: the last dim must be a "
                "multiple of heads + 2*kv_heads");
  const Tensor q = g.input("q", {1, 5, 6, 8}), k = g.input("k", {1, 5, 4, 8});
  expectMessage([&] { g.attention(q, k, k); },
                "attention: q (1,5,6,8) has 6 heads and k (1,5,4,8) 4: the key/value heads must "
                "divide the query heads");
  const Tensor kc = g.input("kc", {2, 8, 16}), vc = g.input("vc", {2, 8, 16});
  const Tensor position = g.input("position", {1}, ops::DType::U32);
  expectMessage([&] { g.cachedAttention(qkv, 6, 4, kc, vc, position); },
                "cachedAttention: (2,3,56), (2,8,16), (2,8,16), (1) with 6 heads and 4 key/value "
                "heads: the key/value heads must divide the query heads");
  // Caches of H*D columns where the heads share Hkv = 2: (2,8,24) is not (B,rows,Hkv*D).
  const Tensor wide = g.input("wide", {2, 8, 24});
  expectMessage(
      [&] {
        g.cachedAttention(g.input("qkv2", {2, 3, 40}), 6, 2, wide, wide, position);
      },
      "the caches must be (B,rows,Hkv*D)");
  EXPECT_EQ(g.nodes().size(), nodes);
}

}  // namespace
}  // namespace vkgrad::test
