// A BPE model: the vocabulary (token id -> bytes) and the ranked merges, and the encoding of
// one pre-tokenized word. A word starts as one symbol per byte (byte-level vocabularies) or per
// character (SentencePiece-style ones); then, again and again, the adjacent pair whose merge
// ranks first (the leftmost of equals) becomes the token the merge makes, until no adjacent
// pair has a merge. That is Hugging Face's BPE with no dropout and no prefixes or suffixes.
//
// A character a SentencePiece-style vocabulary lacks becomes its UTF-8 bytes' tokens "<0x41>"
// with byte fallback (Llama 2's, TinyLlama's, Mistral's), else the unknown token (several
// unknown characters in a row one unknown token with fuse_unk). Bytes that are not UTF-8 are
// each a character of their own, so they take the byte tokens too and round-trip.
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

// How a vocabulary writes its tokens and where a word's merges start.
enum class BpeAlphabet {
  ByteLevel,   // GPT-2's alphabet (byte_level.h), one symbol per byte
  Characters,  // tokens are the UTF-8 they stand for, one symbol per character
};

// A vocabulary and merges as the files write them: tokens in the alphabet, merges as pairs of
// such tokens in rank order.
struct BpeSpec {
  std::vector<std::pair<std::string, uint32_t>> vocab;  // token text -> id
  std::vector<std::pair<std::string, std::string>> merges;
  // Llama 3's option: a word that is itself a token is that token, whatever the merges say.
  bool ignore_merges = false;
  BpeAlphabet alphabet = BpeAlphabet::ByteLevel;
  // Characters only: a character outside the vocabulary as its bytes' "<0xXX>" tokens (all 256
  // must be in the vocabulary), else as unk_token (which must be), fused in runs with fuse_unk.
  bool byte_fallback = false;
  std::string unk_token;
  bool fuse_unk = false;
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
  // byte with no single-byte token (byte-level), a missing "<0xXX>" token (byte fallback) or
  // unk_token, neither byte fallback nor an unk_token (characters), or a merge whose parts or
  // result are not in the vocabulary (naming the merge and its rank). A token whose text is not
  // in the byte-level alphabet (an added token such as "<|endoftext|>" is, "<｜end｜>" is not)
  // stands for its UTF-8 bytes.
  Bpe(const BpeSpec& spec, const std::string& where);
  Bpe(Bpe&& other) noexcept;

  // Appends the tokens of one pre-tokenized word (any non-empty bytes) to out.
  void encodeWord(std::string_view word, std::vector<uint32_t>& out) const;
  // As encodeWord without the cache (for measuring it, and for the cache's own tests).
  void encodeWordUncached(std::string_view word, std::vector<uint32_t>& out) const;

  // One past the largest id.
  uint32_t size() const { return uint32_t(bytes_.size()); }
  bool contains(uint32_t id) const { return id < bytes_.size() && present_[id]; }
  // The bytes token id stands for (with Characters, its text: "▁the", "<0x41>"); contains(id)
  // must hold.
  const std::string& bytes(uint32_t id) const { return bytes_[id]; }
  // The byte a byte fallback token ("<0x41>") stands for, or -1 for any other id.
  int byteOf(uint32_t id) const { return id < byte_of_.size() ? byte_of_[id] : -1; }
  BpeAlphabet alphabet() const { return alphabet_; }
  // The id of the token that stands for exactly these bytes, or -1.
  int64_t find(std::string_view bytes) const;

 private:
  struct Merge {
    uint32_t rank;
    uint32_t result;  // the id of the merged token
  };
  static uint64_t key(uint32_t left, uint32_t right) { return uint64_t(left) << 32 | right; }
  struct Symbol {
    uint32_t id;
    int32_t prev, next;  // -1 at the ends; next = -2 once merged away
  };
  // A word's first symbols: one per byte, or per character with their fallbacks.
  void byteSymbols(std::string_view word, std::vector<Symbol>& symbols) const;
  void characterSymbols(std::string_view word, std::vector<Symbol>& symbols) const;
  // The Characters alphabet's tables, filled by the constructor.
  void characterTables(const BpeSpec& spec, const std::string& where);

  std::vector<std::string> bytes_;  // id -> bytes
  std::vector<bool> present_;       // id -> in the vocabulary
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
  };
  std::unordered_map<std::string, uint32_t, Hash, std::equal_to<>> ids_;  // bytes -> id
  uint32_t byte_ids_[256];  // byte -> its token (byte-level) or its "<0xXX>" token
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> merge
  bool ignore_merges_ = false;
  BpeAlphabet alphabet_ = BpeAlphabet::ByteLevel;
  bool byte_fallback_ = false, fuse_unk_ = false;
  int64_t unk_id_ = -1;
  int64_t ascii_ids_[128];        // Characters: an ASCII character's token, or -1
  std::vector<int16_t> byte_of_;  // id -> the byte a "<0xXX>" token stands for, or -1

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<uint32_t>, Hash, std::equal_to<>> cache_;
};

}  // namespace vkgrad::tokenizers
