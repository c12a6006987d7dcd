// Attention written in general ops (batchMatmul, div, where, softmax, transpose: what an
// importer meets in an exported model) against the flash-attention node on the same
// parameters: the same outputs and the same gradients, causal, at odd sizes. The two routes
// share no kernel, so each checks the other.
#include <cmath>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;

class GeneralAttentionTest : public VkTest {
 protected:
  Rng rng_;
};

constexpr int64_t kB = 2, kT = 7, kH = 3, kD = 5;

TEST_F(GeneralAttentionTest, MatchesFlashAttentionForwardAndBackward) {
  SCOPED_TRACE(rng_.describe());
  graph::ParameterStore store(ctx());
  for (const char* name : {"q", "k", "v"})
    store.add(name, {kB, kT, kH, kD}, graph::Init::normal(0.0f, 1.0f));
  store.initialize(rng_.seed());
  const auto weights = rng_.uniform(size_t(kB * kT * kH * kD));
  std::vector<uint32_t> causal(size_t(kT * kT));
  for (int64_t i = 0; i < kT; ++i)
    for (int64_t j = 0; j < kT; ++j) causal[size_t(i * kT + j)] = j <= i;

  // One graph per route; loss = sum(w * o). Returns o, then dq, dk and dv.
  auto run = [&](bool general) {
    Graph g;
    auto p = [&](const char* name) { return g.parameter(store.at(name)); };
    Tensor o, mask;
    if (general) {
      const std::vector<int> heads{0, 2, 1, 3};  // (B,T,H,D) <-> (B,H,T,D)
      const Tensor q = g.transpose(p("q"), heads), k = g.transpose(p("k"), heads),
                   v = g.transpose(p("v"), heads);
      mask = g.input("mask", {kT, kT}, ops::DType::U32);
      const Tensor scale = g.constant("sqrt_d", {1}, {std::sqrt(float(kD))});
      const Tensor scores = g.div(g.batchMatmul(q, k, false, true), scale);
      const Tensor masked = g.where(mask, scores, g.constant("low", {1}, {-1e30f}));
      o = g.transpose(g.batchMatmul(g.softmax(masked, -1), v), heads);
    } else {
      o = g.attention(p("q"), p("k"), p("v"), /*causal=*/true);
    }
    const Tensor loss = g.sum(g.mul(o, g.constant("w", g.shape(o), weights)));
    g.markOutput(o);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::Executor exec(ctx(), g);
    if (general) exec.setInput(mask, std::span<const uint32_t>(causal));
    exec.step();
    std::vector<std::vector<float>> out{exec.read(o)};
    for (const char* name : {"q", "k", "v"}) out.push_back(exec.read(grads[p(name)]));
    return out;
  };
  const auto flash = run(false), general = run(true);
  const char* what[] = {"o", "dq", "dk", "dv"};
  for (size_t i = 0; i < flash.size(); ++i)
    EXPECT_TRUE(allClose(general[i], flash[i], 2e-5)) << what[i];
}

}  // namespace
}  // namespace vkgrad::test
