// A small SentencePiece-style tokenizer.json (Llama 2's kind) made in the tests: ids <unk> 0,
// <s> 1, </s> 2, the byte fallback tokens <0x00>..<0xFF> 3..258 (byte b is 3 + b), then
// characters and the results of a dozen merges ("▁hello", "▁world", "▁▁", "d▁"), <s> put
// first by the post-processor, the decoder Replace, ByteFallback, Fuse, Strip.
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/io/json_io.h"

namespace vkgrad::test {

inline constexpr uint32_t kSpmUnk = 0, kSpmBos = 1, kSpmEos = 2;
constexpr uint32_t spmByteId(uint8_t b) {
  return 3 + b;
}
// The id of a piece ("▁hello"); throws Error for one the vocabulary lacks.
uint32_t spmId(const std::string& piece);
// One past the largest id.
inline constexpr uint32_t kSpmSize = 280;

// Where the '▁' come from: Llama 2's normalizer (Prepend, Replace), or Mistral's Metaspace
// pre-tokenizer, "first" and split, or "always" unsplit.
enum class SentencePieceForm { Normalizer, MetaspaceFirst, MetaspaceAlwaysUnsplit };

// The file's document; without byte_fallback, no <0xXX> tokens (the ids above stay).
graph::Json sentencePieceJson(SentencePieceForm form, bool byte_fallback = true);

}  // namespace vkgrad::test
