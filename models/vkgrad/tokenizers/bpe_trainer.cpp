#include "vkgrad/tokenizers/bpe_trainer.h"

#include <queue>
#include <tuple>
#include <unordered_map>

#include "vkgrad/tokenizers/byte_level.h"

namespace vkgrad::tokenizers {
namespace {

uint64_t key(uint32_t left, uint32_t right) {
  return uint64_t(left) << 32 | right;
}

struct Word {
  std::vector<uint32_t> ids;
  int64_t count = 0;
};

// The distinct words of `text` as byte ids, each with how often it occurs.
std::vector<Word> distinctWords(std::string_view text, const PreTokenizer& pre_tokenizer) {
  std::vector<Word> words;
  std::unordered_map<std::string_view, size_t> index;
  for (const Piece& p : pre_tokenizer.words(text)) {
    const std::string_view w = text.substr(p.begin, p.end - p.begin);
    const auto [it, fresh] = index.emplace(w, words.size());
    if (fresh) {
      Word word;
      for (const char ch : w) word.ids.push_back(uint8_t(ch));
      words.push_back(std::move(word));
    }
    ++words[it->second].count;
  }
  return words;
}

bool holdsPair(const Word& word, uint32_t l, uint32_t r) {
  for (size_t i = 0; i + 1 < word.ids.size(); ++i)
    if (word.ids[i] == l && word.ids[i + 1] == r) return true;
  return false;
}

// Replaces every (l, r) in the word, left to right without overlaps, by `merged`.
void mergePair(Word& word, uint32_t l, uint32_t r, uint32_t merged) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < word.ids.size(); ++i) {
    if (i + 1 < word.ids.size() && word.ids[i] == l && word.ids[i + 1] == r) {
      ids.push_back(merged);
      ++i;
    } else {
      ids.push_back(word.ids[i]);
    }
  }
  word.ids = std::move(ids);
}

}  // namespace

BpeSpec TrainedBpe::spec() const {
  BpeSpec spec;
  for (size_t id = 0; id < tokens.size(); ++id)
    spec.vocab.emplace_back(toByteLevel(tokens[id]), uint32_t(id));
  for (const auto& [l, r] : merges)
    spec.merges.emplace_back(toByteLevel(tokens[l]), toByteLevel(tokens[r]));
  return spec;
}

TrainedBpe trainBpe(std::string_view text, size_t merges, const PreTokenizer& pre_tokenizer) {
  TrainedBpe out;
  for (int b = 0; b < 256; ++b) out.tokens.emplace_back(1, char(b));
  std::unordered_map<std::string, uint32_t> token_ids;
  for (uint32_t b = 0; b < 256; ++b) token_ids.emplace(out.tokens[b], b);

  std::vector<Word> words = distinctWords(text, pre_tokenizer);

  // How often each pair occurs, and which words hold it (a word may be listed again, or no
  // longer hold it: checked when used).
  std::unordered_map<uint64_t, int64_t> counts;
  std::unordered_map<uint64_t, std::vector<uint32_t>> holders;
  // Most frequent first, then the smaller pair; entries whose count changed are skipped.
  using Entry = std::tuple<int64_t, uint64_t>;  // (count, ~key): larger first in both
  std::priority_queue<Entry> queue;
  const auto add = [&](uint32_t w, int64_t sign) {
    const Word& word = words[w];
    for (size_t i = 0; i + 1 < word.ids.size(); ++i) {
      const uint64_t k = key(word.ids[i], word.ids[i + 1]);
      int64_t& c = counts[k];
      c += sign * word.count;
      if (sign > 0) {
        holders[k].push_back(w);
        queue.emplace(c, ~k);
      } else if (c > 0) {
        queue.emplace(c, ~k);
      }
    }
  };
  for (uint32_t w = 0; w < words.size(); ++w) add(w, 1);

  while (out.merges.size() < merges && !queue.empty()) {
    const auto [count, inverted] = queue.top();
    queue.pop();
    const uint64_t k = ~inverted;
    if (counts[k] != count) continue;  // stale
    if (count < 2) break;              // nothing repeats: merging would only memorise
    const uint32_t l = uint32_t(k >> 32), r = uint32_t(k);
    const std::string merged = out.tokens[l] + out.tokens[r];
    const auto [it, fresh] = token_ids.emplace(merged, uint32_t(out.tokens.size()));
    if (fresh) out.tokens.push_back(merged);
    const uint32_t result = it->second;
    out.merges.emplace_back(l, r);
    std::vector<uint32_t> affected = std::move(holders[k]);
    holders.erase(k);
    for (const uint32_t w : affected) {
      if (!holdsPair(words[w], l, r)) continue;
      add(w, -1);
      mergePair(words[w], l, r, result);
      add(w, 1);
    }
    counts.erase(k);
  }
  return out;
}

}  // namespace vkgrad::tokenizers
