#include "vkgrad/tokenizers/pre_tokenizer.h"

#include <utility>

namespace vkgrad::tokenizers {

PreTokenizer PreTokenizer::gpt2() {
  std::vector<SplitRegex> steps;
  steps.emplace_back(kGpt2Pattern, false, "GPT-2's pre-tokenizer");
  return PreTokenizer(std::move(steps));
}

void PreTokenizer::split(std::string_view text, size_t begin, size_t end,
                         const std::function<void(Piece)>& emit) const {
  if (begin >= end) return;
  // Each step splits every piece of the step before it, depth first.
  std::function<void(size_t, Piece)> step = [&](size_t index, Piece piece) {
    if (index == steps_.size()) return emit(piece);
    steps_[index].split(text, piece.begin, piece.end, [&](Piece inner) { step(index + 1, inner); });
  };
  step(0, {begin, end});
}

std::vector<Piece> PreTokenizer::words(std::string_view text) const {
  std::vector<Piece> out;
  split(text, 0, text.size(), [&](Piece p) { out.push_back(p); });
  return out;
}

}  // namespace vkgrad::tokenizers
