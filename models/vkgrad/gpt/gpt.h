// A decoder-only transformer (GPT) on the graph: token + learned positional embedding,
// `layers` causal transformer blocks (nn/transformer.h), a final LayerNorm (pre-norm only: a
// post-norm block already ends in one) and a linear head to the vocabulary, optionally tied
// to the token table. Trained on windows of token ids against the next token of each.
//
// Parameter names: emb.tok (vocab,width), emb.pos (context,width), h<i>.* for block i,
// ln_f.{g,b} (pre-norm), head.w (width,vocab) unless tied.
//
// The same functions build a Llama-family model (llama/llama.h) when the config says so
// (GptConfig::llama): the decoding, evaluation and training code around them is shared.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/nn/transformer.h"
#include "vkgrad/training/memory_estimate.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::gpt {

// The largest configs vkgrad-gpt accepts, on the command line and in a checkpoint's
// config.json: an absurd value fails at once instead of declaring parameters for minutes.
constexpr int64_t kMaxLayers = 256, kMaxHeads = 256, kMaxWidth = 1 << 16, kMaxContext = 1 << 16,
                  kMaxVocab = 1 << 20;

// A Llama-family model's own settings (llama/llama.h): RMSNorm, rotary positions,
// grouped-query attention and a SwiGLU MLP instead of GPT-2's LayerNorm, learned positions and
// GELU MLP. GptConfig's norm, activation and dropout places do not apply to it.
struct LlamaSpec {
  int64_t kv_heads = 0;         // key/value heads, dividing heads (grouped-query attention)
  int64_t intermediate = 0;     // the SwiGLU MLP's hidden width
  float rope_theta = 10000.0f;  // the rotary embedding's base
  bool qkv_bias = false;        // biases on the q, k, v projections (Qwen2's)
  bool proj_bias = false;       // a bias on the attention's output projection
};

struct GptConfig {
  int64_t vocab = 0;
  int64_t layers = 2;
  int64_t heads = 2;
  int64_t width = 32;    // a multiple of heads
  int64_t context = 32;  // the longest window (the position table's rows)
  nn::Norm norm = nn::Norm::Pre;
  bool tie_weights = false;  // the head is emb.tok transposed
  nn::ActivationSpec activation = nn::ActivationSpec::gelu();
  float dropout = 0.0f;  // GPT-2 places: after the embeddings, on attention and MLP outputs
  // Every LayerNorm's epsilon: 1e-5 as vkgrad-gpt trains it; an imported model sets its own
  // (hf/gpt2.h). Not in vkgrad-gpt's checkpoints, which all use the default.
  float norm_eps = 1e-5f;
  // Set: the model is a Llama (RMSNorm's epsilon is norm_eps); context is its longest window.
  std::optional<LlamaSpec> llama;

  // Throws Error naming the bad field (the bounds are the kMax* above).
  void validate() const;
  nn::BlockConfig block() const;
};

// Adds every parameter with GPT-2's initialisation (a Llama's: llama::declareLlama): weights and
// embeddings N(0, 0.02), the residual projections (attn.proj, mlp.proj) N(0, 0.02/sqrt(2*layers)),
// biases 0, LayerNorm gain 1 and bias 0. Call store.initialize(seed) afterwards.
void declareGpt(graph::ParameterStore& store, const GptConfig& config);

// The state of a decoding graph (gptLogits with a cache): `position`, a (1) u32 input, the
// sequence position of the step's token, and each layer's keys and values of the positions
// before it, (batch, context, width) inputs that persist between steps.
struct GptCache {
  graph::Tensor position;
  std::vector<nn::KvCache> layers;
};
// Adds the cache's input tensors to g.
GptCache gptCache(graph::Graph& g, const GptConfig& config, int64_t batch);

// ids: (B,T) u32, T <= context -> logits (B*T, vocab); causal, so row (b,t) sees ids[b, 0..t].
// With a cache (decoding: the same model, one token at a time), ids is (B,1): the token at
// cache->position of each sequence, whose keys and values join the cache; its logits see
// every earlier token of the cache and itself, as row `position` of a window would.
graph::Tensor gptLogits(graph::Graph& g, const graph::ParameterStore& store,
                        const GptConfig& config, graph::Tensor ids,
                        const GptCache* cache = nullptr);
// ids, targets: (B,T) u32 (targets: the next token of each id) -> mean cross-entropy (1).
graph::Tensor gptLoss(graph::Graph& g, const graph::ParameterStore& store, const GptConfig& config,
                      graph::Tensor ids, graph::Tensor targets);
// A Trainer loss over two datasets, in this order: windows of ids and of their targets, as
// uploadTokenWindows makes them (below). The store and config must outlive the Trainer.
graph::LossFn gptLossFn(const graph::ParameterStore& store, const GptConfig& config);

// The training data of a token stream, on the device: ids row i is tokens[i, i + length),
// targets row i the same shifted by one token; count = tokens - length rows each. Both are
// windows (graph::uploadWindows) of one upload of the stream, the targets one token on, so
// they take the stream's memory once, not count * length. Throws Error when there are fewer
// than length + 1 tokens.
struct TokenWindows {
  graph::Dataset ids, targets;
  int64_t count = 0;
};
TokenWindows uploadTokenWindows(vk::Context& context, std::span<const uint32_t> tokens,
                                int64_t length);
// The same for a stream of `tokens` tokens, declared without device memory
// (graph::declareWindows): for memory estimates and dry runs.
TokenWindows declareTokenWindows(int64_t tokens, int64_t length);

// The device memory of training this model with a graph::Trainer on the windows of a stream of
// `tokens` tokens (context-long, uploadTokenWindows) and evaluating it on the same windows: the
// parameters, the stream, the training graph and the evaluation graph
// (graph::estimateTrainer). Computed from a planning store and declared windows: nothing is
// allocated, whatever the size. `declare`, when given, declares the model in the planning store
// instead of declareGpt, as the run will declare its own (frozen weights stored in 16 bits,
// LoRA adapters: hf/lora.h).
// `window`, when given, is the windows' length (at most config.context), else config.context.
// Throws what declaring or building the model throws.
graph::MemoryEstimate estimateTraining(
    vk::Context& context, const GptConfig& config, int64_t tokens,
    const graph::TrainerOptions& options,
    const std::function<void(graph::ParameterStore&)>& declare = {}, int64_t window = 0);

}  // namespace vkgrad::gpt
