#include "vkgrad/gpt/gpt.h"

#include <cmath>

#include "vkgrad/core/error.h"
#include "vkgrad/llama/llama.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::gpt {

using graph::Init;
using graph::Tensor;

void GptConfig::validate() const {
  auto fail = [](const std::string& why) { throw Error("GptConfig: " + why); };
  auto bound = [&](const char* field, int64_t value, int64_t max) {
    if (value <= 0 || value > max)
      fail(std::string(field) + " " + std::to_string(value) + " must be in [1, " +
           std::to_string(max) + "]");
  };
  bound("vocab", vocab, kMaxVocab);
  bound("layers", layers, kMaxLayers);
  bound("heads", heads, kMaxHeads);
  bound("width", width, kMaxWidth);
  bound("context", context, kMaxContext);
  if (width % heads != 0)
    fail("width " + std::to_string(width) + " must be a multiple of heads " +
         std::to_string(heads));
  if (width / heads > ops::kMaxHeadDim)
    fail("width " + std::to_string(width) + " over " + std::to_string(heads) +
         " heads is a head dimension of " + std::to_string(width / heads) +
         ", above the attention kernels' " + std::to_string(ops::kMaxHeadDim) +
         " (ops/attention.h): more heads");
  if (!(dropout >= 0.0f && dropout < 1.0f)) fail("dropout must be in [0, 1)");
  if (!(norm_eps > 0.0f && norm_eps < 1.0f)) fail("norm_eps must be in (0, 1)");
  if (llama) llama::validateLlama(*this);
}

nn::BlockConfig GptConfig::block() const {
  nn::BlockConfig b;
  b.width = width;
  b.heads = heads;
  b.norm = norm;
  b.activation = activation;
  b.causal = true;
  b.dropout = dropout;
  b.norm_eps = norm_eps;
  return b;
}

void declareGpt(graph::ParameterStore& store, const GptConfig& config) {
  if (config.llama) return llama::declareLlama(store, config);
  config.validate();
  const Init normal = Init::normal(0.0f, 0.02f);
  // GPT-2: each block adds two projections into the residual stream, so their scale keeps
  // the stream's variance independent of depth.
  nn::BlockInit init{normal, Init::normal(0.0f, 0.02f / std::sqrt(2.0f * float(config.layers)))};
  nn::declareEmbedding(store, "emb", config.vocab, config.context, config.width, normal, normal);
  for (int64_t i = 0; i < config.layers; ++i)
    nn::declareBlock(store, nn::blockName(i), config.block(), init);
  if (config.norm == nn::Norm::Pre) nn::declareLayerNorm(store, "ln_f", config.width);
  if (!config.tie_weights)
    nn::declareLinear(store, "head", config.width, config.vocab, normal,
                      /*bias=*/false);
}

GptCache gptCache(graph::Graph& g, const GptConfig& config, int64_t batch) {
  GptCache cache{g.input("position", {1}, ops::DType::U32), {}};
  // A Llama caches its kv_heads key/value heads only (grouped-query attention).
  const int64_t columns =
      config.llama ? config.llama->kv_heads * (config.width / config.heads) : config.width;
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string name = nn::blockName(i);
    const ops::Shape shape{batch, config.context, columns};
    cache.layers.push_back(
        {g.input(name + ".keys", shape), g.input(name + ".values", shape), cache.position});
  }
  return cache;
}

Tensor gptLogits(graph::Graph& g, const graph::ParameterStore& store, const GptConfig& config,
                 Tensor ids, const GptCache* cache) {
  if (cache && (g.shape(ids).rank() != 2 || g.shape(ids)[1] != 1 ||
                int64_t(cache->layers.size()) != config.layers))
    throw ShapeError(g.describe("gptLogits", {ids}) +
                     ": decoding with a cache takes one token per sequence, (B,1), and a cache "
                     "of every layer");
  if (config.llama) return llama::llamaLogits(g, store, config, ids, cache);
  Tensor tok;
  const Tensor positions = cache ? cache->position : Tensor{};
  Tensor x = g.dropout(nn::embedding(g, store, "emb", ids, &tok, positions),
                       config.dropout);  // (B,T,C)
  for (int64_t i = 0; i < config.layers; ++i) {
    const nn::KvCache* layer = cache ? &cache->layers[size_t(i)] : nullptr;
    // A recomputed segment (Graph::recomputed): where the trainer asks for it, only x is kept.
    x = g.recomputed(
        [&] { return nn::block(g, store, nn::blockName(i), config.block(), x, layer); });
  }
  if (config.norm == nn::Norm::Pre) x = nn::layerNorm(g, store, "ln_f", x, config.norm_eps);
  const ops::Shape s = g.shape(x);
  x = g.reshape(x, {s[0] * s[1], s[2]});  // (B*T,C)
  if (config.tie_weights) return g.matmul(x, tok, {}, false, /*trans_b=*/true);
  return nn::linear(g, store, "head", x);
}

Tensor gptLoss(graph::Graph& g, const graph::ParameterStore& store, const GptConfig& config,
               Tensor ids, Tensor targets) {
  const ops::Shape s = g.shape(ids);
  if (!(g.shape(targets) == s))
    throw ShapeError(g.describe("gptLoss", {ids, targets}) + ": ids and targets differ");
  const Tensor logits = gptLogits(g, store, config, ids);
  return g.crossEntropy(logits, g.reshape(targets, {s.numel()}));
}

graph::LossFn gptLossFn(const graph::ParameterStore& store, const GptConfig& config) {
  return [&store, &config](graph::Graph& g, std::span<const Tensor> batch) {
    if (batch.size() != 2) throw Error("gptLossFn: needs two datasets (ids, targets)");
    return gptLoss(g, store, config, batch[0], batch[1]);
  };
}

namespace {

void checkLength(int64_t tokens, int64_t length) {
  if (length <= 0) throw Error("uploadTokenWindows: the window length must be positive");
  if (tokens < length + 1)
    throw Error("uploadTokenWindows: " + std::to_string(tokens) +
                " tokens, need at least context + 1 = " + std::to_string(length + 1));
}

// Every window of the stream (the last has no next token) as ids, and the same windows one
// token on as targets, over one buffer.
TokenWindows split(const graph::Dataset& windows, int64_t length) {
  TokenWindows w{windows, windows, windows.shape[0] - 1};
  w.ids.name = "ids";
  w.targets.name = "targets";
  w.ids.shape = w.targets.shape = {w.count, length};
  w.targets.offset = windows.offset + 4;
  return w;
}

}  // namespace

TokenWindows uploadTokenWindows(vk::Context& context, std::span<const uint32_t> tokens,
                                int64_t length) {
  checkLength(int64_t(tokens.size()), length);
  return split(graph::uploadWindows(context, "tokens", tokens, length), length);
}

TokenWindows declareTokenWindows(int64_t tokens, int64_t length) {
  checkLength(tokens, length);
  return split(graph::declareWindows("tokens", tokens, length), length);
}

}  // namespace vkgrad::gpt
