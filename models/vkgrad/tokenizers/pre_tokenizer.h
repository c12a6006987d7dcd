// The pre-tokenizer: text cut into words before BPE, so no token spans a word boundary. It is
// a sequence of regex splits (regex_split.h), each applied to every piece the previous one
// left: GPT-2's is its one pattern (ByteLevel with use_regex), Llama 3's and Qwen2's a Split
// with their own pattern, SmolLM2's single digits (Digits) before GPT-2's pattern.
#pragma once

#include <functional>
#include <string_view>
#include <vector>

#include "vkgrad/tokenizers/regex_split.h"

namespace vkgrad::tokenizers {

class PreTokenizer {
 public:
  // GPT-2's: its pattern alone.
  static PreTokenizer gpt2();
  // No steps: the whole text is one word.
  PreTokenizer() = default;
  explicit PreTokenizer(std::vector<SplitRegex> steps) : steps_(std::move(steps)) {}

  // Calls emit with each word of text[begin, end) as soon as it is found (nothing is
  // collected: a text of many megabytes splits in constant memory). The words cover the range
  // exactly, in order, none empty.
  void split(std::string_view text, size_t begin, size_t end,
             const std::function<void(Piece)>& emit) const;
  // All the words of text, collected.
  std::vector<Piece> words(std::string_view text) const;

  const std::vector<SplitRegex>& steps() const { return steps_; }

 private:
  std::vector<SplitRegex> steps_;
};

}  // namespace vkgrad::tokenizers
