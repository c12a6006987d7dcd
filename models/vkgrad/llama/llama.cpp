#include "vkgrad/llama/llama.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/nn/layers.h"
#include "vkgrad/runtime/ops/rope.h"

namespace vkgrad::llama {

using graph::Graph;
using graph::Init;
using graph::ParameterStore;
using graph::Tensor;

void validateLlama(const gpt::GptConfig& c) {
  auto fail = [](const std::string& why) { throw Error("GptConfig: " + why); };
  const gpt::LlamaSpec& l = *c.llama;
  if (l.kv_heads <= 0 || c.heads % l.kv_heads != 0)
    fail("kv_heads " + std::to_string(l.kv_heads) + " must divide heads " +
         std::to_string(c.heads));
  if ((c.width / c.heads) % 2 != 0)
    fail("the head dimension " + std::to_string(c.width / c.heads) +
         " must be even (rotary positions turn pairs of it)");
  if (l.intermediate <= 0 || l.intermediate > gpt::kMaxWidth * 8)
    fail("intermediate " + std::to_string(l.intermediate) + " must be in [1, " +
         std::to_string(gpt::kMaxWidth * 8) + "]");
  if (!(l.rope_theta > 0.0f)) fail("rope_theta must be positive");
}

void declareLlama(ParameterStore& store, const gpt::GptConfig& c) {
  c.validate();
  const gpt::LlamaSpec& l = *c.llama;
  const int64_t C = c.width, D = C / c.heads, qkv = (c.heads + 2 * l.kv_heads) * D;
  const Init normal = Init::normal(0.0f, 0.02f);
  store.add("emb.tok", {c.vocab, C}, normal);
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string p = nn::blockName(i);
    nn::declareRmsNorm(store, p + ".ln1", C);
    nn::declareLinear(store, p + ".attn.qkv", C, qkv, normal, l.qkv_bias);
    nn::declareLinear(store, p + ".attn.proj", C, C, normal, l.proj_bias);
    nn::declareRmsNorm(store, p + ".ln2", C);
    nn::declareLinear(store, p + ".mlp.gate_up", C, 2 * l.intermediate, normal, /*bias=*/false);
    nn::declareLinear(store, p + ".mlp.proj", l.intermediate, C, normal, /*bias=*/false);
  }
  nn::declareRmsNorm(store, "ln_f", C);
  if (!c.tie_weights) nn::declareLinear(store, "head", C, c.vocab, normal, /*bias=*/false);
}

namespace {

// residual + h·W. The add is the product's own epilogue (Graph::matmulAdd) unless dropout
// sits between them (a training graph with dropout), as nn::block does it.
Tensor addProduct(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor h,
                  Tensor residual, float dropout) {
  if (dropout == 0.0f || !g.training()) return nn::linear(g, store, prefix, h, residual);
  return g.add(residual, g.dropout(nn::linear(g, store, prefix, h), dropout));
}

// One block on x (B,T,C) -> (B,T,C); with a cache, x is the newest row of each sequence.
Tensor block(Graph& g, const ParameterStore& store, const gpt::GptConfig& c, int64_t i, Tensor x,
             const nn::KvCache* cache) {
  const gpt::LlamaSpec& l = *c.llama;
  const std::string p = nn::blockName(i);
  const ops::Shape s = g.shape(x);
  const int64_t H = c.heads, Hkv = l.kv_heads, D = c.width / H;
  Tensor qkv =
      nn::linear(g, store, p + ".attn.qkv", nn::rmsNorm(g, store, p + ".ln1", x, c.norm_eps));
  // The q and k heads turn, v passes through: one pass over the fused projection, viewed as
  // (B,T,H+2Hkv,D). A decoding step's rows sit at the cache's position.
  const Tensor position = cache ? cache->position : Tensor{};
  qkv = g.reshape(graph::ropeHeads(g, g.reshape(qkv, {s[0], s[1], H + 2 * Hkv, D}), l.rope_theta,
                                   position, H + Hkv),
                  {s[0], s[1], (H + 2 * Hkv) * D});
  const Tensor o = cache ? g.cachedAttention(qkv, H, Hkv, cache->keys, cache->values, position)
                         : g.attention(qkv, H, Hkv, /*causal=*/true);  // (B,T,C)
  x = addProduct(g, store, p + ".attn.proj", o, x, c.dropout);
  const Tensor gate_up =
      nn::linear(g, store, p + ".mlp.gate_up", nn::rmsNorm(g, store, p + ".ln2", x, c.norm_eps));
  return addProduct(g, store, p + ".mlp.proj", g.swiglu(gate_up), x, c.dropout);
}

}  // namespace

Tensor llamaLogits(Graph& g, const ParameterStore& store, const gpt::GptConfig& c, Tensor ids,
                   const gpt::GptCache* cache) {
  const ops::Shape s = g.shape(ids);
  if (s.rank() != 2 || s[1] > c.context)
    throw ShapeError(g.describe("llamaLogits", {ids}) + ": ids must be (B,T) with T <= context " +
                     std::to_string(c.context));
  const Tensor tok = g.parameter(store.at("emb.tok"));
  Tensor x = g.gather(tok, ids);  // (B,T,C)
  for (int64_t i = 0; i < c.layers; ++i) {
    const nn::KvCache* layer = cache ? &cache->layers[size_t(i)] : nullptr;
    // A recomputed segment (Graph::recomputed): where the trainer asks for it, only x is kept.
    x = g.recomputed([&] { return block(g, store, c, i, x, layer); });
  }
  x = nn::rmsNorm(g, store, "ln_f", x, c.norm_eps);
  x = g.reshape(x, {s[0] * s[1], c.width});  // (B*T,C)
  if (c.tie_weights) return g.matmul(x, tok, {}, false, /*trans_b=*/true);
  return nn::linear(g, store, "head", x);
}

}  // namespace vkgrad::llama
