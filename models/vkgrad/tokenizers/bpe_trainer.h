// A small byte-level BPE trainer, for vocabularies made here: the tests' and benchmarks'
// tokenizers (trained on Debian's own texts), and a model trained from scratch. It counts the
// pre-tokenizer's words, starts from the 256 bytes, and repeatedly merges the adjacent pair
// that occurs most often (counted over the words, each weighted by its count; ties go to the
// smaller pair of ids), as Hugging Face's BpeTrainer does without its frequency and alphabet
// limits. Deterministic: the same text gives the same merges.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vkgrad/tokenizers/bpe.h"
#include "vkgrad/tokenizers/pre_tokenizer.h"

namespace vkgrad::tokenizers {

struct TrainedBpe {
  // id -> bytes: ids 0..255 are the single bytes in byte order, then each new token in the
  // order its merge made it.
  std::vector<std::string> tokens;
  std::vector<std::pair<uint32_t, uint32_t>> merges;  // in rank order

  // As the files hold it: tokens in the byte-level alphabet.
  BpeSpec spec() const;
};

// Up to `merges` merges (fewer when no pair occurs twice). Words are the pre-tokenizer's.
TrainedBpe trainBpe(std::string_view text, size_t merges,
                    const PreTokenizer& pre_tokenizer = PreTokenizer::gpt2());

}  // namespace vkgrad::tokenizers
