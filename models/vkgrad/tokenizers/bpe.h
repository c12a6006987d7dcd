// A byte-level BPE model: the vocabulary (token id -> bytes) and the ranked merges, and the
// encoding of one pre-tokenized word. A word starts as one token per byte; then, again and
// again, the adjacent pair whose merge ranks first (the leftmost of equals) becomes the
// token the merge makes, until no adjacent pair has a merge. That is Hugging Face's BPE with
// no dropout, no unknown token and no prefixes or suffixes, the only form byte-level
// vocabularies use.
//
// Speed: a merge is found by a hash of the pair of ids (no strings at encode time), each
// word's merges run over a linked list with a heap of candidate pairs (n log n however long the
// word), and each distinct word's tokens are cached (up to kCacheWords words), since text
// repeats its words (up to kCacheWordBytes long).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace vkgrad::tokenizers {

// A vocabulary and merges as the files write them: tokens in GPT-2's byte-level alphabet
// (byte_level.h), merges as pairs of such tokens in rank order.
struct BpeSpec {
  std::vector<std::pair<std::string, uint32_t>> vocab;  // token text -> id
  std::vector<std::pair<std::string, std::string>> merges;
  // Llama 3's option: a word that is itself a token is that token, whatever the merges say.
  bool ignore_merges = false;
};

// Ids above this are refused: no vocabulary is near it, and a corrupt file must not make the
// reader allocate gigabytes.
constexpr uint32_t kMaxTokenId = (1u << 24) - 1;

class Bpe {
 public:
  static constexpr size_t kCacheWords = 1 << 16;
  // Longer words are not cached: they are rare, and the cache's memory stays bounded.
  static constexpr size_t kCacheWordBytes = 256;

  // Throws Error "<where>: ..." for an id above kMaxTokenId, an id or a text given twice, a
  // byte with no single-byte token, or a merge whose parts or result are not in the vocabulary
  // (naming the merge and its rank). A token whose text is not in the byte-level alphabet (an
  // added token such as "<|endoftext|>" is, "<｜end｜>" is not) stands for its UTF-8 bytes.
  Bpe(const BpeSpec& spec, const std::string& where);
  Bpe(Bpe&& other) noexcept;

  // Appends the tokens of one pre-tokenized word (any non-empty bytes) to out.
  void encodeWord(std::string_view word, std::vector<uint32_t>& out) const;
  // As encodeWord without the cache (for measuring it, and for the cache's own tests).
  void encodeWordUncached(std::string_view word, std::vector<uint32_t>& out) const;

  // One past the largest id.
  uint32_t size() const { return uint32_t(bytes_.size()); }
  bool contains(uint32_t id) const { return id < bytes_.size() && present_[id]; }
  // The bytes token id stands for; contains(id) must hold.
  const std::string& bytes(uint32_t id) const { return bytes_[id]; }
  // The id of the token that stands for exactly these bytes, or -1.
  int64_t find(std::string_view bytes) const;

 private:
  struct Merge {
    uint32_t rank;
    uint32_t result;  // the id of the merged token
  };
  static uint64_t key(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }

  std::vector<std::string> bytes_;  // id -> bytes
  std::vector<bool> present_;       // id -> in the vocabulary
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;  // bytes -> id
  uint32_t byte_ids_[256];
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> merge
  bool ignore_merges_ = false;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>, Hash, std::equal_to<>> cache_;
};

}  // namespace vkgrad::tokenizers
