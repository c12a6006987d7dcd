// The BPE model on vocabularies of a handful of merges, each encoding checked by hand: merge
// order by rank, leftmost first among equals, the cache agreeing with the uncached path, Llama
// 3's ignore_merges, and the vocabulary's errors.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/tokenizers/small_bpe.h"
#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/bpe.h"
#include "vkgrad/tokenizers/byte_level.h"

namespace vkgrad::test {
namespace {

using tokenizers::Bpe;
using tokenizers::BpeSpec;
using Ids = std::vector<uint32_t>;

Ids word(const Bpe& bpe, const std::string& w) {
  Ids cached, uncached;
  bpe.encodeWord(w, cached);
  bpe.encodeWord(w, cached);  // the second from the cache
  bpe.encodeWordUncached(w, uncached);
  EXPECT_EQ(cached.size(), 2 * uncached.size()) << w;
  EXPECT_EQ(Ids(cached.begin(), cached.begin() + ptrdiff_t(uncached.size())), uncached) << w;
  EXPECT_EQ(Ids(cached.begin() + ptrdiff_t(uncached.size()), cached.end()), uncached) << w;
  return uncached;
}

TEST(Bpe, HandCheckedWords) {
  // he(256) ll(257) hell(258) hello(259) " w"(260) or(261) " wor"(262) ld(263)
  const Bpe bpe(smallBpe({{"h", "e"},
                          {"l", "l"},
                          {"he", "ll"},
                          {"hell", "o"},
                          {" ", "w"},
                          {"o", "r"},
                          {" w", "or"},
                          {"l", "d"}}),
                "test");
  EXPECT_EQ(word(bpe, "hello"), (Ids{259}));
  EXPECT_EQ(word(bpe, " world"), (Ids{262, 263}));
  EXPECT_EQ(word(bpe, "hell"), (Ids{258}));
  EXPECT_EQ(word(bpe, "yell"), (Ids{'y', 'e', 257}));
  EXPECT_EQ(word(bpe, "held"), (Ids{256, 263}));  // (he, l) has no merge; (l, d) does
  EXPECT_EQ(word(bpe, "lll"), (Ids{257, 'l'}));   // the leftmost of two equal pairs first
  EXPECT_EQ(word(bpe, "x"), (Ids{'x'}));
  EXPECT_EQ(word(bpe, std::string("\xff\x00", 2)), (Ids{255, 0}));
}

TEST(Bpe, RankDecidesNotPosition) {
  // "abc": (b, c) ranks before (a, b), so a + bc, though (a, b) is further left.
  const Bpe bpe(smallBpe({{"b", "c"}, {"a", "b"}, {"a", "bc"}}), "test");  // bc ab abc
  EXPECT_EQ(word(bpe, "abc"), (Ids{258}));
  EXPECT_EQ(word(bpe, "abab"), (Ids{257, 257}));
  // "cabc": bc first, then a+bc.
  EXPECT_EQ(word(bpe, "cabc"), (Ids{'c', 258}));
}

TEST(Bpe, LongWord) {
  // 20,000 'a's (past the cache's longest word) with a chain of doublings: aa, aaaa, ...
  std::vector<std::pair<std::string, std::string>> merges;
  for (std::string a = "a"; a.size() < 64; a += a) merges.emplace_back(a, a);
  const Bpe bpe(smallBpe(merges), "test");
  Ids ids = word(bpe, std::string(20000, 'a'));
  // 20000 = 312 * 64 + 32: 312 tokens of 64, then one of 32.
  ASSERT_EQ(ids.size(), 313u);
  EXPECT_EQ(ids.front(), 256u + 5);
  EXPECT_EQ(ids.back(), 256u + 4);
}

TEST(Bpe, IgnoreMerges) {
  // "abc" is in the vocabulary, but no merge makes it from "ab" + "c".
  BpeSpec spec = smallBpe({{"a", "b"}, {"b", "c"}});  // ab(256) bc(257)
  spec.vocab.emplace_back("abc", 258);
  EXPECT_EQ(word(Bpe(spec, "merges"), "abc"), (Ids{256, 'c'}));
  spec.ignore_merges = true;
  EXPECT_EQ(word(Bpe(spec, "whole words"), "abc"), (Ids{258}));
}

TEST(Bpe, FindAndBytes) {
  const Bpe bpe(smallBpe({{" ", "w"}}), "test");
  EXPECT_EQ(bpe.find(" w"), 256);
  EXPECT_EQ(bpe.find("zz"), -1);
  EXPECT_EQ(bpe.bytes(256), " w");
  EXPECT_EQ(bpe.size(), 257u);
}

void expectError(const BpeSpec& spec, const std::string& part) {
  try {
    Bpe bpe(spec, "vocab.json");
    FAIL() << "accepted; expected " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Bpe, VocabularyErrors) {
  BpeSpec missing_byte = smallBpe({});
  missing_byte.vocab.erase(missing_byte.vocab.begin() + ' ');
  expectError(missing_byte, "vocab.json: the vocabulary has no token for byte 32 ('Ġ')");

  BpeSpec bad_merge = smallBpe({});
  bad_merge.merges.emplace_back("a", "zz");
  expectError(bad_merge, "merge 0 ('a zz'): 'zz' is not in the vocabulary");
  BpeSpec no_result = smallBpe({});
  no_result.merges.emplace_back("a", "b");
  expectError(no_result, "merge 0 ('a b'): 'ab' is not in the vocabulary");

  BpeSpec twice = smallBpe({});
  twice.vocab.emplace_back("ab", 72);
  expectError(twice, "id 72 is given to two tokens, 'H' and 'ab'");
  BpeSpec huge = smallBpe({});
  huge.vocab.emplace_back("ab", 4000000000u);
  expectError(huge, "token 'ab' has id 4000000000, above the largest vkgrad takes");
}

}  // namespace
}  // namespace vkgrad::test
