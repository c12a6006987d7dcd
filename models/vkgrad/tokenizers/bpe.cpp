#include "vkgrad/tokenizers/bpe.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <queue>

#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/byte_level.h"

namespace vkgrad::tokenizers {
namespace {

// A token's text for messages: as the file writes it, quoted.
std::string quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

}  // namespace

Bpe::Bpe(const BpeSpec& spec, const std::string& where)
    : ignore_merges_(spec.ignore_merges), alphabet_(spec.alphabet) {
  const bool byte_level = alphabet_ == BpeAlphabet::ByteLevel;
  uint32_t top = 0;
  for (const auto& [text, id] : spec.vocab) {
    if (id > kMaxTokenId)
      throw Error(where + ": token " + quoted(text) + " has id " + std::to_string(id) +
                  ", above the largest vkgrad takes (" + std::to_string(kMaxTokenId) + ")");
    top = std::max(top, id + 1);
  }
  bytes_.resize(top);
  present_.assign(top, false);
  std::unordered_map<std::string_view, uint32_t> text_ids;  // the file's text -> id
  text_ids.reserve(spec.vocab.size());
  for (const auto& [text, id] : spec.vocab) {
    if (present_[id])
      throw Error(where + ": id " + std::to_string(id) + " is given to two tokens, " +
                  quoted(byte_level ? toByteLevel(bytes_[id]) : bytes_[id]) + " and " +
                  quoted(text));
    if (!text_ids.emplace(text, id).second)
      throw Error(where + ": token " + quoted(text) + " is listed twice");
    // As Hugging Face's ByteLevel decoder does: a text outside the alphabet is its own bytes.
    std::optional<std::string> decoded = byte_level ? fromByteLevel(text) : std::nullopt;
    bytes_[id] = decoded ? std::move(*decoded) : text;
    present_[id] = true;
  }
  // bytes -> id, the lowest id where two texts stand for the same bytes.
  ids_.reserve(spec.vocab.size());
  for (uint32_t id = 0; id < top; ++id)
    if (present_[id]) ids_.emplace(bytes_[id], id);
  if (!byte_level) characterTables(spec, where);
  for (int b = 0; b < 256 && byte_level; ++b) {
    const int64_t id = find(std::string_view(reinterpret_cast<const char*>(&b), 1));
    if (id < 0) {
      std::string text;
      appendUtf8(text, byteToCodePoint(uint8_t(b)));
      throw Error(where + ": the vocabulary has no token for byte " + std::to_string(b) + " (" +
                  quoted(text) + "), which every byte-level vocabulary holds");
    }
    byte_ids_[b] = uint32_t(id);
  }
  merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    // Named references, not a structured binding: clang 14 cannot capture those in a lambda.
    const std::string& left = spec.merges[rank].first;
    const std::string& right = spec.merges[rank].second;
    const auto id = [&](const std::string& text) {
      const auto it = text_ids.find(text);
      if (it == text_ids.end())
        throw Error(where + ": merge " + std::to_string(rank) + " (" + quoted(left + " " + right) +
                    "): " + quoted(text) + " is not in the vocabulary");
      return it->second;
    };
    const uint32_t l = id(left), r = id(right), result = id(left + right);
    // A pair merged twice ranks where it is listed last, as in Hugging Face's BPE.
    merges_[key(l, r)] = Merge{uint32_t(rank), result};
  }
}

Bpe::Bpe(Bpe&& other) noexcept
    : bytes_(std::move(other.bytes_)),
      present_(std::move(other.present_)),
      ids_(std::move(other.ids_)),
      merges_(std::move(other.merges_)),
      ignore_merges_(other.ignore_merges_),
      alphabet_(other.alphabet_),
      byte_fallback_(other.byte_fallback_),
      fuse_unk_(other.fuse_unk_),
      unk_id_(other.unk_id_),
      byte_of_(std::move(other.byte_of_)),
      cache_(std::move(other.cache_)) {
  std::copy(std::begin(other.byte_ids_), std::end(other.byte_ids_), byte_ids_);
  std::copy(std::begin(other.ascii_ids_), std::end(other.ascii_ids_), ascii_ids_);
}

void Bpe::characterTables(const BpeSpec& spec, const std::string& where) {
  byte_fallback_ = spec.byte_fallback;
  fuse_unk_ = spec.fuse_unk;
  for (int c = 0; c < 128; ++c) ascii_ids_[c] = find(std::string(1, char(c)));
  if (!spec.unk_token.empty()) {
    unk_id_ = find(spec.unk_token);
    if (unk_id_ < 0)
      throw Error(where + ": the unk_token " + quoted(spec.unk_token) +
                  " is not in the vocabulary");
  }
  if (byte_fallback_) {
    byte_of_.assign(bytes_.size(), -1);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      const int64_t id = find(name);
      if (id < 0)
        throw Error(where + ": byte_fallback is set but the vocabulary has no token " +
                    quoted(name) + " for byte " + std::to_string(b));
      byte_ids_[b] = uint32_t(id);
      byte_of_[size_t(id)] = int16_t(b);
    }
  } else if (unk_id_ < 0) {
    throw Error(where +
                ": neither byte_fallback nor an unk_token: a character outside the vocabulary "
                "would have no token");
  }
}

int64_t Bpe::find(std::string_view bytes) const {
  const auto it = ids_.find(bytes);
  return it == ids_.end() ? -1 : int64_t(it->second);
}

void Bpe::encodeWord(std::string_view word, std::vector<uint32_t>& out) const {
  if (word.size() == 1 && alphabet_ == BpeAlphabet::ByteLevel) {
    out.push_back(byte_ids_[uint8_t(word[0])]);
    return;
  }
  if (word.size() > kCacheWordBytes) return encodeWordUncached(word, out);
  {
    const std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  encodeWordUncached(word, out);
  const std::lock_guard lock(cache_mutex_);
  // Full: later words go uncached (a text's common words come early and stay).
  if (cache_.size() < kCacheWords)
    cache_.emplace(std::string(word), std::vector<uint32_t>(out.begin() + start, out.end()));
}

void Bpe::byteSymbols(std::string_view word, std::vector<Symbol>& symbols) const {
  const int32_t n = int32_t(word.size());
  symbols.resize(size_t(n));
  for (int32_t i = 0; i < n; ++i)
    symbols[size_t(i)] = {byte_ids_[uint8_t(word[size_t(i)])], i - 1, i + 1 < n ? i + 1 : -1};
}

void Bpe::characterSymbols(std::string_view word, std::vector<Symbol>& symbols) const {
  symbols.reserve(word.size());
  const auto push = [&](uint32_t id) {
    const int32_t i = int32_t(symbols.size());
    if (i > 0) symbols.back().next = i;
    symbols.push_back({id, i - 1, -1});
  };
  bool after_unk = false;  // the last symbol is an unknown token
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t at = pos;
    const uint8_t lead = uint8_t(word[pos]);
    int64_t id = -1;
    if (lead < 0x80)
      id = ascii_ids_[lead], ++pos;
    else if (nextCodePoint(word, pos))
      id = find(word.substr(at, pos - at));
    else
      ++pos;  // a byte that is not UTF-8: a character of its own, never a token
    if (id >= 0) {
      push(uint32_t(id));
      after_unk = false;
    } else if (byte_fallback_) {
      for (size_t k = at; k < pos; ++k) push(byte_ids_[uint8_t(word[k])]);
      after_unk = false;
    } else {
      if (!(fuse_unk_ && after_unk)) push(uint32_t(unk_id_));
      after_unk = true;
    }
  }
}

void Bpe::encodeWordUncached(std::string_view word, std::vector<uint32_t>& out) const {
  if (ignore_merges_) {
    const int64_t whole = find(word);
    if (whole >= 0) {
      out.push_back(uint32_t(whole));
      return;
    }
  }
  // The word's symbols as a linked list; a merge joins a symbol with its successor, which
  // leaves the list.
  std::vector<Symbol> symbols;
  if (alphabet_ == BpeAlphabet::ByteLevel)
    byteSymbols(word, symbols);
  else
    characterSymbols(word, symbols);
  const int32_t n = int32_t(symbols.size());

  // Candidate merges: lowest rank first, then leftmost. An entry goes stale when either side
  // has changed since it was pushed; it is then skipped.
  struct Candidate {
    uint32_t rank;
    int32_t pos;  // the left symbol
    uint32_t left, right, result;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto consider = [&](int32_t pos) {
    const int32_t next = symbols[size_t(pos)].next;
    if (next < 0) return;
    const uint32_t l = symbols[size_t(pos)].id, r = symbols[size_t(next)].id;
    const auto it = merges_.find(key(l, r));
    if (it != merges_.end()) queue.push({it->second.rank, pos, l, r, it->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[size_t(c.pos)];
    if (left.next < 0 || left.id != c.left || symbols[size_t(left.next)].id != c.right) continue;
    Symbol& right = symbols[size_t(left.next)];
    left.id = c.result;
    left.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = c.pos;
    right.next = -2;
    if (left.prev >= 0) consider(left.prev);
    consider(c.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[size_t(i)].next) out.push_back(symbols[size_t(i)].id);
}

}  // namespace vkgrad::tokenizers
