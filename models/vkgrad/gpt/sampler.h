// Text generation from a GPT on the device. The drawn token's logits row is turned into
// top-k / temperature weights and sampled on the device (ops/sample.h): only the drawn id,
// 4 bytes, comes back per token. Two ways to run the model for each token:
//
//   Cached (the default): each layer's keys and values stay on the device (gptCache), and
//     one compiled graph of one row per token is replayed with the token and its position
//     (Graph::cachedAttention): per token, one row through every matmul, attention over the
//     rows so far.
//   Window: the whole window of the last `context` tokens through a compiled forward graph
//     for every token (causal, so padding after them changes nothing), then the last token's
//     row: `context` rows through every matmul per token. The oracle the cached path is
//     tested against.
//
// Both see the same tokens up to `context` of them. Past that, the learned positions of a
// window would shift with every token, which invalidates every cached key, so the cache
// restarts instead of sliding: it keeps the last context/2 tokens (recomputed at positions
// 0, 1, ...) and grows again to `context`. visibleTokens() says which tokens each path sees.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/ops/sample.h"
#include "vkgrad/runtime/executor.h"

namespace vkgrad::gpt {

enum class Decoding { Cached, Window };
const char* decodingName(Decoding decoding);  // "cached", "window"

// How many of the last tokens of a sequence of n (>= 1) the next token is drawn from: all
// of them up to `context`; past it, the last `context` (Window), or (Cached) the tokens since
// the cache's last restart: context/2 kept, then one more per token up to `context`.
size_t visibleTokens(size_t n, int64_t context, Decoding decoding);

class Sampler {
 public:
  // The store holds the model's parameters (initialised or loaded) and must outlive the
  // sampler. seed fixes the draws: the same seed and calls give the same text. valid_vocab:
  // only ids below it are drawn (0: the whole vocabulary), for a vocabulary padded past its
  // tokenizer's size (GPT-2's 50257 to 50304), whose padded ids stand for no text; the
  // logits are cut to their first valid_vocab columns before top-k and the draw. Throws Error
  // on a valid_vocab outside 0..vocab.
  Sampler(vk::Context& context, const graph::ParameterStore& store, const GptConfig& config,
          const ops::SampleOptions& options, uint64_t seed, Decoding decoding = Decoding::Cached,
          int64_t valid_vocab = 0);
  ~Sampler();

  // The next token after `tokens` (at least one; the last visibleTokens() of them are seen).
  // Cached: the tokens already in the cache that start the visible ones are not computed
  // again, so continuing a sequence costs one row per new token. Throws Error on an empty
  // span or an id >= vocab.
  uint32_t next(std::span<const uint32_t> tokens);
  // Appends `count` tokens to tokens, one next() each.
  void extend(std::vector<uint32_t>& tokens, int64_t count);
  Decoding decoding() const { return decoding_; }

 private:
  uint32_t nextWindow(std::span<const uint32_t> seen);
  uint32_t nextCached(std::span<const uint32_t> seen);

  GptConfig config_;
  Decoding decoding_;
  graph::Graph graph_;
  graph::Tensor ids_, row_, drawn_;  // row_: Window only
  GptCache cache_;                   // Cached only
  std::unique_ptr<graph::Executor> executor_;
  // Window: the padded window. Cached: the tokens whose keys and values the cache holds, at
  // positions 0, 1, ...
  std::vector<uint32_t> tokens_;
};

}  // namespace vkgrad::gpt
