#include "vkgrad/gpt/sampler.h"

#include <algorithm>

#include "vkgrad/core/error.h"

namespace vkgrad::gpt {

Sampler::Sampler(vk::Context& context, const graph::ParameterStore& store,
                 const GptConfig& config, const ops::SampleOptions& options, uint64_t seed)
    : config_(config) {
  config_.validate();
  graph_.setTraining(false);  // no dropout
  graph_.setSeed(seed);
  ids_ = graph_.input("ids", {1, config_.context}, ops::DType::U32);
  row_ = graph_.input("row", {1}, ops::DType::U32);
  const graph::Tensor logits = gptLogits(graph_, store, config_, ids_);  // (context, vocab)
  drawn_ = graph_.sample(graph_.gather(logits, row_), options);       // (1)
  graph_.markOutput(drawn_);
  executor_ = std::make_unique<graph::Executor>(context, graph_);
  window_.assign(size_t(config_.context), 0);
}

Sampler::~Sampler() = default;

uint32_t Sampler::next(std::span<const uint32_t> tokens) {
  if (tokens.empty()) throw Error("Sampler: needs at least one token to continue");
  const size_t n = std::min(tokens.size(), size_t(config_.context));
  const std::span<const uint32_t> seen = tokens.last(n);
  for (uint32_t id : seen)
    if (id >= uint64_t(config_.vocab))
      throw Error("Sampler: token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(config_.vocab));
  std::copy(seen.begin(), seen.end(), window_.begin());
  std::fill(window_.begin() + ptrdiff_t(n), window_.end(), 0u);  // after the last: never seen
  const uint32_t row = uint32_t(n - 1);
  executor_->setInput(ids_, window_);
  executor_->setInput(row_, std::span<const uint32_t>(&row, 1));
  executor_->step();
  return executor_->readWords(drawn_).at(0);
}

void Sampler::extend(std::vector<uint32_t>& tokens, int64_t count) {
  for (int64_t i = 0; i < count; ++i) tokens.push_back(next(tokens));
}

}  // namespace vkgrad::gpt
