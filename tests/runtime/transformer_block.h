// A tiny GPT-style pre-norm transformer block on token ids, shared by the planner and trainer
// tests: trainable token embedding + learned positions, layerNorm, one fused QKV projection,
// causal attention reading q, k and v in place, output projection, residual, layerNorm, GELU
// MLP, residual, a linear head and the next-token cross-entropy.
#pragma once

#include <string>

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::test {

struct TinyTransformer {
  int64_t vocab = 11, seq = 8, dim = 16, heads = 2, hidden = 32;
};

inline void addTransformerParameters(graph::ParameterStore& store, const TinyTransformer& c) {
  using graph::Init;
  store.add("tok", {c.vocab, c.dim}, Init::normal(0.0f, 0.5f));
  store.add("pos", {c.seq, c.dim}, Init::normal(0.0f, 0.1f));
  for (const char* ln : {"ln1", "ln2"}) {
    store.add(std::string(ln) + ".g", {c.dim}, Init::ones());
    store.add(std::string(ln) + ".b", {c.dim}, Init::zeros());
  }
  store.add("qkv.w", {c.dim, 3 * c.dim}, Init::xavierUniform());
  store.add("qkv.b", {3 * c.dim}, Init::zeros());
  store.add("proj.w", {c.dim, c.dim}, Init::xavierUniform());
  store.add("proj.b", {c.dim}, Init::zeros());
  store.add("mlp1.w", {c.dim, c.hidden}, Init::xavierUniform());
  store.add("mlp1.b", {c.hidden}, Init::zeros());
  store.add("mlp2.w", {c.hidden, c.dim}, Init::xavierUniform());
  store.add("mlp2.b", {c.dim}, Init::zeros());
  store.add("head", {c.dim, c.vocab}, Init::xavierUniform());
}

// ids, targets: (B, seq) u32 -> the mean cross-entropy (1).
inline graph::Tensor transformerLoss(graph::Graph& g, const graph::ParameterStore& store,
                                     const TinyTransformer& c, graph::Tensor ids,
                                     graph::Tensor targets) {
  auto p = [&](const std::string& name) { return g.parameter(store.at(name)); };
  graph::Tensor x = g.add(g.gather(p("tok"), ids), p("pos"));  // (B,T,C)
  const graph::Tensor h = g.layerNorm(x, p("ln1.g"), p("ln1.b"));
  const graph::Tensor qkv = g.matmul(h, p("qkv.w"), p("qkv.b"));  // (B,T,3C)
  const graph::Tensor a = g.attention(qkv, c.heads, /*causal=*/true);
  x = g.add(x, g.matmul(a, p("proj.w"), p("proj.b")));
  const graph::Tensor h2 = g.layerNorm(x, p("ln2.g"), p("ln2.b"));
  x = g.add(x, g.matmul(g.gelu(g.matmul(h2, p("mlp1.w"), p("mlp1.b"))), p("mlp2.w"), p("mlp2.b")));
  return g.crossEntropy(g.matmul(x, p("head")), targets);
}

}  // namespace vkgrad::test
