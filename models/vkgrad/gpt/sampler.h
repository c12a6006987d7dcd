// Text generation from a GPT on the device. Each new token is one replay of a compiled
// forward graph over the last `context` tokens (causal, so padding after them changes
// nothing), then the logits row of the last token is gathered, turned into top-k /
// temperature weights and sampled on the device (ops/sampling.h): only the drawn id, 4 bytes,
// comes back per token.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/graph/executor.h"
#include "vkgrad/ops/sampling.h"

namespace vkgrad::gpt {

class Sampler {
 public:
  // The store holds the model's parameters (initialised or loaded) and must outlive the
  // sampler. seed fixes the draws: the same seed and tokens give the same text.
  Sampler(vk::Context& context, const graph::ParameterStore& store, const GptConfig& config,
          const ops::SampleOptions& options, uint64_t seed);
  ~Sampler();

  // The next token after `tokens` (at least one; only the last `context` are seen).
  // Throws Error on an empty span or an id >= vocab.
  uint32_t next(std::span<const uint32_t> tokens);
  // Appends `count` tokens to tokens, one next() each.
  void extend(std::vector<uint32_t>& tokens, int64_t count);

 private:
  GptConfig config_;
  graph::Graph graph_;
  graph::Tensor ids_, row_, drawn_;
  std::unique_ptr<graph::Executor> executor_;
  std::vector<uint32_t> window_;
};

}  // namespace vkgrad::gpt
