// The whole tokenizer: encodings checked by hand through the pre-tokenizer and added tokens,
// special tokens on and off, and the exact round trip on random bytes, invalid UTF-8 included.
#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "models/tokenizers/small_bpe.h"
#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/bpe_trainer.h"
#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::test {
namespace {

using tokenizers::Tokenizer;
using Ids = std::vector<uint32_t>;

TEST(Tokenizer, HandCheckedText) {
  const Tokenizer t = helloTokenizer();
  // "hello" | " world" -> hello | " wor" ld; "!" is a byte.
  EXPECT_EQ(t.encode("hello world!"), (Ids{259, 262, 263, '!'}));
  // One word; no merge joins the two "hello"s.
  EXPECT_EQ(t.encode("hellohello"), (Ids{259, 259}));
  EXPECT_EQ(t.encode("he  world"), (Ids{256, ' ', 262, 263}));
  EXPECT_EQ(t.encode(""), Ids{});
  EXPECT_EQ(t.decode(Ids{259, 262, 263, '!'}), "hello world!");
  EXPECT_EQ(t.size(), 266u);
  EXPECT_EQ(t.tokenId("<|endoftext|>"), 264);
  EXPECT_EQ(t.tokenId("Ġwor"), 262);  // as the files write it
  EXPECT_EQ(t.tokenId("nope"), -1);
}

TEST(Tokenizer, AddedTokensAreFoundFirst) {
  const Tokenizer t = helloTokenizer();
  // The added token splits the text; each side is pre-tokenized on its own.
  EXPECT_EQ(t.encode("hello<|endoftext|> world"), (Ids{259, 264, 262, 263}));
  EXPECT_EQ(t.encode("<|endoftext|><|endoftext|>"), (Ids{264, 264}));
  EXPECT_EQ(t.encode("x<pad>"), (Ids{'x', 265}));
  // Special tokens off: "<|endoftext|>" is its text; a token that is not special still matches.
  const Ids plain = t.encode("<|endoftext|><pad>", /*special=*/false);
  EXPECT_EQ(plain.back(), 265u);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 264u), 0);
  EXPECT_EQ(t.decode(plain), "<|endoftext|><pad>");
  // Decoding: the content, or nothing for special tokens when asked to skip them.
  EXPECT_EQ(t.decode(Ids{259, 264, 265}), "hello<|endoftext|><pad>");
  EXPECT_EQ(t.decode(Ids{259, 264, 265}, /*skip_special=*/true), "hello<pad>");
}

TEST(Tokenizer, LongestAddedTokenWins) {
  const Tokenizer t(smallBpe({}), tokenizers::PreTokenizer::gpt2(),
                    {{"<a>", 300, true}, {"<a><b>", 301, true}, {"a><", 302, false}}, "test");
  // At "<": "<a><b>" is longer than "<a>"; "a><" starts later, so it loses.
  EXPECT_EQ(t.encode("<a><b>"), (Ids{301}));
  EXPECT_EQ(t.encode("<a><c"), (Ids{300, '<', 'c'}));
  EXPECT_EQ(t.encode("<a><c", false), (Ids{'<', 302, 'c'}));
}

TEST(Tokenizer, UnknownIdIsAnError) {
  const Tokenizer t = helloTokenizer();
  try {
    t.decode(Ids{1, 266});
    FAIL() << "decoded";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "token id 266 is not in the vocabulary (266 ids)");
  }
}

// Random bytes: some from a small alphabet that forms words, some anything at all.
std::string randomBytes(Rng& rng, size_t n) {
  static const char kCommon[] = "hello world, 'll 12 \n\t<|endoftext|>é";
  std::string s;
  for (size_t i = 0; i < n; ++i)
    s.push_back(rng.below(2) ? kCommon[rng.below(sizeof(kCommon) - 1)] : char(rng.below(256)));
  return s;
}

TEST(Tokenizer, RoundTripOnRandomBytes) {
  Rng rng;
  const Tokenizer hello = helloTokenizer();
  // A vocabulary of realistic words, trained here on Debian's licences.
  const tokenizers::TrainedBpe trained = tokenizers::trainBpe(licenceText(60000), 400);
  const Tokenizer licences(trained.spec(), tokenizers::PreTokenizer::gpt2(),
                           {{"<|endoftext|>", uint32_t(trained.tokens.size()), true}}, "trained");
  for (int round = 0; round < 200; ++round) {
    const std::string text = randomBytes(rng, rng.below(300));
    for (const Tokenizer* t : {&hello, &licences}) {
      for (const bool special : {true, false}) {
        const Ids ids = t->encode(text, special);
        ASSERT_EQ(t->decode(ids), text) << rng.describe() << " round " << round;
      }
    }
  }
  // Every byte value alone, and all of them in a row.
  std::string all;
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, char(b));
    EXPECT_EQ(licences.decode(licences.encode(one)), one);
    all += one;
  }
  EXPECT_EQ(licences.decode(licences.encode(all)), all);
  // Real text takes fewer tokens than bytes with the trained merges.
  const std::string prose = licenceText(20000);
  const Ids ids = licences.encode(prose);
  EXPECT_EQ(licences.decode(ids), prose);
  EXPECT_LT(ids.size() * 2, prose.size());
}

TEST(Tokenizer, EncodeFromSeveralThreads) {
  const tokenizers::TrainedBpe trained = tokenizers::trainBpe(licenceText(30000), 200);
  const Tokenizer t(trained.spec(), tokenizers::PreTokenizer::gpt2(), {}, "trained");
  const std::string text = licenceText(50000);
  const Ids expected = t.encode(text);
  std::vector<Ids> results(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < results.size(); ++i)
    threads.emplace_back([&, i] { results[i] = t.encode(text); });
  for (std::thread& th : threads) th.join();
  for (const Ids& r : results) EXPECT_EQ(r, expected);
}

}  // namespace
}  // namespace vkgrad::test
