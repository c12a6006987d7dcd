#include "vkgrad/tokenizers/pre_tokenizer.h"

#include <utility>

namespace vkgrad::tokenizers {

PreTokenizer PreTokenizer::gpt2() {
  std::vector<SplitRegex> steps;
  steps.emplace_back(kGpt2Pattern, false, "GPT-2's pre-tokenizer");
  return PreTokenizer(std::move(steps));
}

void PreTokenizer::split(std::string_view text, size_t begin, size_t end, std::vector<Piece>& words,
                         std::vector<Piece>& scratch) const {
  words.clear();
  if (begin >= end) return;
  words.push_back({begin, end});
  for (const SplitRegex& step : steps_) {
    scratch.clear();
    for (const Piece& piece : words) step.split(text, piece.begin, piece.end, scratch);
    std::swap(words, scratch);
  }
}

}  // namespace vkgrad::tokenizers
