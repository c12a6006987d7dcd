// SentencePiece-style tokenizers (Llama 2's, TinyLlama's, Mistral's) read from a small
// tokenizer.json written here: spaces as '▁' by the normalizer (older files) or a Metaspace
// pre-tokenizer (newer ones), merges over characters, byte fallback for what the vocabulary
// lacks, the unknown token without it, <s> from the post-processor, the decoder's Strip; each
// encoding worked out by hand; round trips on random bytes; bad files named.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "models/tokenizers/small_sentencepiece.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/tokenizers/metaspace.h"
#include "vkgrad/tokenizers/tokenizer_json.h"

namespace vkgrad::test {
namespace {

using graph::Json;
using tokenizers::Tokenizer;
using Ids = std::vector<uint32_t>;
using SpmForm = SentencePieceForm;
constexpr uint32_t kUnk = kSpmUnk, kBos = kSpmBos, kEos = kSpmEos;
uint32_t id(const std::string& piece) {
  return spmId(piece);
}
constexpr uint32_t byteId(uint8_t b) {
  return spmByteId(b);
}

// small_sentencepiece.cpp's merges by rank: 0 "▁ h", 1 "e l", 2 "l o", 3 "▁h el", 4 "▁hel lo",
// 5 "▁ w", 6 "o r", 7 "▁w or", 8 "l d", 9 "▁wor ld", 10 "▁ ▁", 11 "d ▁".
Tokenizer parse(const Json& j) {
  return tokenizers::parseTokenizerJson(graph::dumpJson(j), "spm/tokenizer.json");
}

TEST(SentencePieceTokenizer, HandCheckedMerges) {
  for (const SpmForm form :
       {SpmForm::Normalizer, SpmForm::MetaspaceFirst, SpmForm::MetaspaceAlwaysUnsplit}) {
    const Tokenizer t = parse(sentencePieceJson(form));
    SCOPED_TRACE(int(form));
    // "▁hello▁world" as characters ▁ h e l l o ▁ w o r l d; ranks 0 (▁h), 1 (el), 2 (lo),
    // 3 (▁hel), 4 (▁hello), 5 (▁w), 6 (or), 7 (▁wor), 8 (ld), 9 (▁world).
    EXPECT_EQ(t.encode("hello world"), (Ids{id("▁hello"), id("▁world")}));
    // 'i' is not a piece: its byte. "é" is: one character of two bytes, no byte tokens.
    EXPECT_EQ(t.encode("hi"), (Ids{id("▁h"), byteId('i')}));
    EXPECT_EQ(t.encode("hé"), (Ids{id("▁h"), id("é")}));
    // '日' (E6 97 A5) is not in the vocabulary: its three bytes; so is a byte that is not UTF-8.
    EXPECT_EQ(t.encode("日"), (Ids{id("▁"), byteId(0xE6), byteId(0x97), byteId(0xA5)}));
    EXPECT_EQ(t.encode("\xff"), (Ids{id("▁"), byteId(0xFF)}));
    EXPECT_EQ(t.decode(t.encode("hello world")), "hello world");
    EXPECT_EQ(t.decode(t.encode("日 \xff")), "日 \xff");
    EXPECT_EQ(t.encode(""), Ids{});
  }
}

TEST(SentencePieceTokenizer, FormsDifferWhereHuggingFacesDo) {
  const Tokenizer normalizer = parse(sentencePieceJson(SpmForm::Normalizer));
  const Tokenizer first = parse(sentencePieceJson(SpmForm::MetaspaceFirst));
  const Tokenizer unsplit = parse(sentencePieceJson(SpmForm::MetaspaceAlwaysUnsplit));
  // Two leading spaces. Prepend puts a '▁' before whatever the text starts with: ▁ ▁ ▁ h e l l o;
  // ▁h first (rank 0), then up to ▁hello, then the first ▁ ▁ (rank 10). Metaspace puts none
  // before a text that starts with one: ▁ ▁ h ... gives ▁ ▁hello.
  EXPECT_EQ(normalizer.encode("  hello"), (Ids{id("▁▁"), id("▁hello")}));
  EXPECT_EQ(first.encode("  hello"), (Ids{id("▁"), id("▁hello")}));
  // The decoder strips one leading space: only Prepend's text comes back whole.
  EXPECT_EQ(normalizer.decode(normalizer.encode("  hello")), "  hello");
  EXPECT_EQ(first.decode(first.encode("  hello")), " hello");
  // "▁d▁d": unsplit, the merge "d ▁" (rank 11) joins across the space; split, each ▁d is a
  // word of its own and has no merge.
  EXPECT_EQ(unsplit.encode("d d"), (Ids{id("▁"), id("d▁"), id("d")}));
  EXPECT_EQ(first.encode("d d"), (Ids{id("▁"), id("d"), id("▁"), id("d")}));
  EXPECT_EQ(normalizer.encode("d d"), (Ids{id("▁"), id("d▁"), id("d")}));
  // After an added token Prepend and "always" put a '▁' again, "first" does not: w o r l d
  // takes or (rank 6), ld (rank 8), and no merge joins w, or, ld.
  EXPECT_EQ(normalizer.encode("hello</s>world"), (Ids{id("▁hello"), kEos, id("▁world")}));
  EXPECT_EQ(unsplit.encode("hello</s>world"), (Ids{id("▁hello"), kEos, id("▁world")}));
  EXPECT_EQ(first.encode("hello</s>world"), (Ids{id("▁hello"), kEos, id("w"), id("or"), id("ld")}));
  // The decoder sees added tokens as text; skipped, the strip reaches the next token's space.
  EXPECT_EQ(first.decode(Ids{id("▁hello"), kEos, id("▁world")}), "hello</s> world");
  EXPECT_EQ(first.decode(Ids{kBos, id("▁hello")}), "<s> hello");
  EXPECT_EQ(first.decode(Ids{kBos, id("▁hello")}, /*skip_special=*/true), "hello");
  // A continuation keeps its leading space: "Hello" then a sampled "▁world".
  EXPECT_EQ(first.decode(Ids{id("▁world")}, false, /*continuation=*/true), " world");
  EXPECT_EQ(first.decode(Ids{id("▁world")}), "world");
}

TEST(SentencePieceTokenizer, BeginningOfTextFromThePostProcessor) {
  const Tokenizer t = parse(sentencePieceJson(SpmForm::Normalizer));
  EXPECT_EQ(t.postTemplate().prefix, Ids{kBos});
  EXPECT_EQ(t.encodeWithTemplate("hello"), (Ids{kBos, id("▁hello")}));
  EXPECT_EQ(t.encode("hello"), Ids{id("▁hello")});
  // Written in the text, <s> is the token; with special off, its characters' bytes.
  EXPECT_EQ(t.encode("<s>hello"), (Ids{kBos, id("▁hello")}));
  EXPECT_EQ(t.encode("<s>", /*special=*/false),
            (Ids{id("▁"), byteId('<'), byteId('s'), byteId('>')}));
  EXPECT_EQ(t.tokenId("▁hello"), id("▁hello"));
  EXPECT_EQ(t.tokenId("<0x41>"), byteId('A'));
}

TEST(SentencePieceTokenizer, UnknownTokenWithoutByteFallback) {
  const Tokenizer fused = parse(sentencePieceJson(SpmForm::Normalizer, /*byte_fallback=*/false));
  // ▁ h i 日: i and 日 have no piece; fuse_unk makes the two one <unk>.
  EXPECT_EQ(fused.encode("hi日"), (Ids{id("▁h"), kUnk}));
  Json j = sentencePieceJson(SpmForm::Normalizer, false);
  j["model"]["fuse_unk"] = false;
  EXPECT_EQ(parse(j).encode("hi日"), (Ids{id("▁h"), kUnk, kUnk}));
}

// Random bytes: letters of the vocabulary, spaces, characters it lacks, invalid UTF-8; no
// '▁' (decoded as a space) and no leading space (Metaspace does not keep it).
std::string randomText(Rng& rng, size_t n) {
  static const std::vector<std::string> parts = {"h", "e", "l",  "o", "w",  "r",   "d",   " ",
                                                 " ", "é", "日", "q", "\n", "<s>", "</s>"};
  std::string text = "x";
  while (text.size() < n) {
    if (rng.below(4) == 0)
      text.push_back(char(rng.below(256)));
    else
      text += parts[rng.below(uint32_t(parts.size()))];
  }
  for (size_t at = text.find("\xe2\x96\x81"); at != std::string::npos;
       at = text.find("\xe2\x96\x81"))
    text[at] = 'x';
  return text;
}

TEST(SentencePieceTokenizer, RandomBytesRoundTrip) {
  Rng rng;
  const Tokenizer tokenizers[] = {parse(sentencePieceJson(SpmForm::Normalizer)),
                                  parse(sentencePieceJson(SpmForm::MetaspaceFirst)),
                                  parse(sentencePieceJson(SpmForm::MetaspaceAlwaysUnsplit))};
  for (int round = 0; round < 200; ++round) {
    const std::string text = randomText(rng, rng.below(120));
    for (const Tokenizer& t : tokenizers) {
      // special = false: added tokens written in the text are its characters, which come back.
      const Ids ids = t.encode(text, /*special=*/false);
      ASSERT_EQ(t.decode(ids), text) << rng.describe();
      for (const uint32_t i : ids) ASSERT_NE(i, kUnk) << rng.describe();
    }
  }
}

// Without "d▁" every token's '▁' lead it, so an unsplit text is encoded word by word (and
// cached): the ids must be those of the whole text as one word.
TEST(SentencePieceTokenizer, WordsServeAnUnsplitTextWhenNoMergeCrossesASpace) {
  Json j = sentencePieceJson(SpmForm::MetaspaceAlwaysUnsplit);
  j["model"]["merges"].erase(j["model"]["merges"].size() - 1);  // "d ▁", the last
  j["model"]["vocab"].erase("d▁");
  const Tokenizer t = parse(j);
  EXPECT_TRUE(t.encodesWords());
  EXPECT_FALSE(parse(sentencePieceJson(SpmForm::MetaspaceAlwaysUnsplit)).encodesWords());
  EXPECT_TRUE(parse(sentencePieceJson(SpmForm::MetaspaceFirst)).encodesWords());  // split
  Rng rng;
  for (int round = 0; round < 100; ++round) {
    const std::string text = randomText(rng, rng.below(200));  // starts with 'x', no '▁'
    std::string whole(tokenizers::kMetaspace);
    for (const char c : text)
      whole += c == ' ' ? std::string(tokenizers::kMetaspace) : std::string(1, c);
    Ids expected;
    t.bpe().encodeWordUncached(whole, expected);
    ASSERT_EQ(t.encode(text, /*special=*/false), expected) << rng.describe();
  }
}

TEST(SentencePieceTokenizer, UnsupportedAndBadFilesAreNamed) {
  const auto error = [](const Json& j) -> std::string {
    try {
      parse(j);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const auto refused = [&](SpmForm form, const char* pointer, const Json& value,
                           const std::string& expected) {
    Json j = sentencePieceJson(form);
    j[Json::json_pointer(pointer)] = value;
    const std::string what = error(j);
    EXPECT_NE(what.find(expected), std::string::npos) << pointer << ": " << what;
    EXPECT_EQ(what.rfind("spm/tokenizer.json: ", 0), 0u) << what;
  };
  refused(SpmForm::Normalizer, "/model/type", "Unigram", "model: type Unigram is not supported");
  refused(SpmForm::Normalizer, "/normalizer/normalizers/2", {{"type", "Lowercase"}},
          "normalizer.normalizers[2]: normalizer Lowercase");
  refused(SpmForm::Normalizer, "/normalizer/normalizers/0/prepend", "_",
          "normalizer.normalizers[0]: Prepend of \"_\"");
  refused(SpmForm::Normalizer, "/normalizer", {{"type", "NFKC"}}, "normalizer: normalizer NFKC");
  refused(SpmForm::Normalizer, "/pre_tokenizer", {{"type", "Metaspace"}},
          "Metaspace after a normalizer");
  refused(SpmForm::Normalizer, "/normalizer", nullptr, "neither a Metaspace pre-tokenizer");
  refused(SpmForm::MetaspaceFirst, "/pre_tokenizer/prepend_scheme", "sometimes",
          "pre_tokenizer.prepend_scheme: \"sometimes\" is not supported");
  refused(SpmForm::MetaspaceFirst, "/pre_tokenizer/replacement", "_", "pre_tokenizer.replacement");
  refused(SpmForm::MetaspaceFirst, "/pre_tokenizer", {{"type", "Whitespace"}},
          "pre_tokenizer: type Whitespace with a SentencePiece-style decoder");
  refused(SpmForm::Normalizer, "/decoder/decoders/3/stop", 1, "decoder.decoders[3]: a Strip other");
  refused(SpmForm::Normalizer, "/decoder/decoders/2", {{"type", "CTC"}},
          "decoder.decoders[2]: decoder CTC");
  Json strip_first = sentencePieceJson(SpmForm::Normalizer);
  std::swap(strip_first["decoder"]["decoders"][2], strip_first["decoder"]["decoders"][3]);
  EXPECT_NE(error(strip_first).find("decoder.decoders[2]: Strip before Fuse"), std::string::npos)
      << error(strip_first);
  Json missing = sentencePieceJson(SpmForm::Normalizer);
  missing["model"]["vocab"].erase("<0x41>");
  EXPECT_NE(error(missing).find("byte_fallback is set but the vocabulary has no token '<0x41>'"),
            std::string::npos)
      << error(missing);
  Json no_unk = sentencePieceJson(SpmForm::Normalizer, false);
  no_unk["model"]["unk_token"] = nullptr;
  EXPECT_NE(error(no_unk).find("neither byte_fallback nor an unk_token"), std::string::npos)
      << error(no_unk);
  Json bad_unk = sentencePieceJson(SpmForm::Normalizer);
  bad_unk["model"]["unk_token"] = "<nope>";
  EXPECT_NE(error(bad_unk).find("the unk_token '<nope>' is not in the vocabulary"),
            std::string::npos)
      << error(bad_unk);
  Json merge = sentencePieceJson(SpmForm::Normalizer);
  merge["model"]["merges"].push_back("w d");
  EXPECT_NE(error(merge).find("merge 12 ('w d'): 'wd' is not in the vocabulary"), std::string::npos)
      << error(merge);
}

}  // namespace
}  // namespace vkgrad::test
