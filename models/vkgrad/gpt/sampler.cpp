#include "vkgrad/gpt/sampler.h"

#include <algorithm>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/precision.h"

namespace vkgrad::gpt {

const char* decodingName(Decoding decoding) {
  return decoding == Decoding::Cached ? "cached" : "window";
}

size_t visibleTokens(size_t n, int64_t context, Decoding decoding) {
  const size_t ctx = size_t(context);
  if (n <= ctx) return n;
  if (decoding == Decoding::Window) return ctx;
  // Restarts at n = ctx + 1, ctx + 1 + (ctx - keep), ...: keep tokens, then the new one.
  const size_t keep = ctx / 2;
  return keep + (n - ctx - 1) % (ctx - keep) + 1;
}

Sampler::Sampler(vk::Context& context, const graph::ParameterStore& store, const GptConfig& config,
                 const ops::SampleOptions& options, uint64_t seed, Decoding decoding,
                 int64_t valid_vocab)
    : config_(config), decoding_(decoding) {
  config_.validate();
  if (valid_vocab < 0 || valid_vocab > config_.vocab)
    throw Error("Sampler: valid_vocab " + std::to_string(valid_vocab) +
                " must be from 1 to the vocabulary's " + std::to_string(config_.vocab) +
                " (0: all of it)");
  graph_.setTraining(false);  // no dropout
  graph_.setSeed(seed);
  graph::Tensor row_logits;
  if (decoding_ == Decoding::Cached) {
    ids_ = graph_.input("ids", {1, 1}, ops::DType::U32);
    cache_ = gptCache(graph_, config_, 1);
    row_logits = gptLogits(graph_, store, config_, ids_, &cache_);  // (1, vocab)
  } else {
    ids_ = graph_.input("ids", {1, config_.context}, ops::DType::U32);
    row_ = graph_.input("row", {1}, ops::DType::U32);
    const graph::Tensor logits = gptLogits(graph_, store, config_, ids_);  // (context, vocab)
    row_logits = graph_.gather(logits, row_);
    tokens_.assign(size_t(config_.context), 0);
  }
  // Cut rather than masked: the top-k weights take finite logits only (ops/sample.h), and
  // the ids below valid_vocab keep their numbers.
  if (valid_vocab > 0 && valid_vocab < config_.vocab)
    row_logits = graph_.sliceAxis(row_logits, 1, 0, valid_vocab);  // (1, valid_vocab)
  drawn_ = graph_.sample(row_logits, options);                     // (1)
  graph_.markOutput(drawn_);
  // Parameters a store keeps in 16 bits (an imported model's) are read as stored.
  graph::applyPrecision(graph_, graph::Precision::F32);
  executor_ = std::make_unique<graph::Executor>(context, graph_);
}

Sampler::~Sampler() = default;

uint32_t Sampler::next(std::span<const uint32_t> tokens) {
  if (tokens.empty()) throw Error("Sampler: needs at least one token to continue");
  const std::span<const uint32_t> seen =
      tokens.last(visibleTokens(tokens.size(), config_.context, decoding_));
  for (uint32_t id : seen)
    if (id >= uint64_t(config_.vocab))
      throw Error("Sampler: token id " + std::to_string(id) + " is outside the vocabulary of " +
                  std::to_string(config_.vocab));
  return decoding_ == Decoding::Cached ? nextCached(seen) : nextWindow(seen);
}

uint32_t Sampler::nextWindow(std::span<const uint32_t> seen) {
  const size_t n = seen.size();
  std::copy(seen.begin(), seen.end(), tokens_.begin());
  std::fill(tokens_.begin() + ptrdiff_t(n), tokens_.end(), 0u);  // after the last: never seen
  const uint32_t row = uint32_t(n - 1);
  executor_->setInput(ids_, tokens_);
  executor_->setInput(row_, std::span<const uint32_t>(&row, 1));
  executor_->step();
  return executor_->readWords(drawn_).at(0);
}

uint32_t Sampler::nextCached(std::span<const uint32_t> seen) {
  // The cache's rows that still start the visible tokens stay; the last visible token is
  // always run (its row gives the logits), the rest of them after the kept rows too.
  size_t kept = 0;
  while (kept < tokens_.size() && kept + 1 < seen.size() && tokens_[kept] == seen[kept]) ++kept;
  tokens_.resize(kept);
  for (size_t i = kept; i < seen.size(); ++i) {
    const uint32_t id = seen[i], position = uint32_t(i);
    executor_->setInput(ids_, std::span<const uint32_t>(&id, 1));
    executor_->setInput(cache_.position, std::span<const uint32_t>(&position, 1));
    // Rows before the last only fill the cache: queued without waiting (their draws are not
    // read); the last step waits for its drawn id.
    if (i + 1 < seen.size()) {
      executor_->submit();
    } else {
      executor_->step();
    }
    tokens_.push_back(id);
  }
  return executor_->readWords(drawn_).at(0);
}

void Sampler::extend(std::vector<uint32_t>& tokens, int64_t count) {
  for (int64_t i = 0; i < count; ++i) tokens.push_back(next(tokens));
}

}  // namespace vkgrad::gpt
