// The pre-tokenizers' splits: GPT-2's pattern on text where its rules show (contractions,
// digits, Unicode letters and digits, runs of white space), Llama 3's, Digits, and bytes that
// are not UTF-8, which must split without failing and cover the input exactly.
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/pre_tokenizer.h"
#include "vkgrad/tokenizers/regex_split.h"

namespace vkgrad::test {
namespace {

using tokenizers::Piece;
using tokenizers::PreTokenizer;
using tokenizers::SplitRegex;
using Words = std::vector<std::string>;

// Llama 3's Split pattern, as its tokenizer.json holds it.
const char* const kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Words words(const PreTokenizer& pre, const std::string& text) {
  const std::vector<Piece> pieces = pre.words(text);
  Words out;
  size_t covered = 0;
  for (const Piece& p : pieces) {
    EXPECT_EQ(p.begin, covered) << "pieces must cover the text in order";
    EXPECT_LT(p.begin, p.end) << "no empty piece";
    covered = p.end;
    out.push_back(text.substr(p.begin, p.end - p.begin));
  }
  EXPECT_EQ(covered, text.size());
  return out;
}

PreTokenizer pattern(const char* regex) {
  std::vector<SplitRegex> steps;
  steps.emplace_back(regex, false, "test");
  return PreTokenizer(std::move(steps));
}

TEST(Gpt2PreTokenizer, Contractions) {
  const PreTokenizer gpt2 = PreTokenizer::gpt2();
  EXPECT_EQ(words(gpt2, "I'm sure they'll say it's don't"),
            (Words{"I", "'m", " sure", " they", "'ll", " say", " it", "'s", " don", "'t"}));
  // Case-sensitive: "'T" is punctuation then a letter.
  EXPECT_EQ(words(gpt2, "DON'T"), (Words{"DON", "'", "T"}));
  EXPECT_EQ(words(gpt2, "we've'd"), (Words{"we", "'ve", "'d"}));
}

TEST(Gpt2PreTokenizer, DigitsLettersAndPunctuation) {
  const PreTokenizer gpt2 = PreTokenizer::gpt2();
  EXPECT_EQ(words(gpt2, "abc123 4567 x9"), (Words{"abc", "123", " 4567", " x", "9"}));
  EXPECT_EQ(words(gpt2, "hello!!! ok?!"), (Words{"hello", "!!!", " ok", "?!"}));
  EXPECT_EQ(words(gpt2, "a+b=(c)"), (Words{"a", "+", "b", "=(", "c", ")"}));
}

TEST(Gpt2PreTokenizer, UnicodeLettersAndDigits) {
  const PreTokenizer gpt2 = PreTokenizer::gpt2();
  // \p{L} covers accented Latin, CJK and Cyrillic; \p{N} Arabic-Indic digits and Roman numerals.
  EXPECT_EQ(words(gpt2, "naïve café 東京 Привет"), (Words{"naïve", " café", " 東京", " Привет"}));
  EXPECT_EQ(words(gpt2, "x٣٤ Ⅻ"), (Words{"x", "٣٤", " Ⅻ"}));
  // An emoji is neither: punctuation-like, kept with its leading space.
  EXPECT_EQ(words(gpt2, "hi 🙂🙂"), (Words{"hi", " 🙂🙂"}));
}

TEST(Gpt2PreTokenizer, WhiteSpaceRuns) {
  const PreTokenizer gpt2 = PreTokenizer::gpt2();
  // A run before a word leaves its last space to the word (\s+(?!\S) backs off by one).
  EXPECT_EQ(words(gpt2, "  two   three"), (Words{" ", " two", "  ", " three"}));
  // At the end the whole run is one piece; newlines are not the optional space.
  EXPECT_EQ(words(gpt2, "end   \n"), (Words{"end", "   \n"}));
  EXPECT_EQ(words(gpt2, "a\n\nb"), (Words{"a", "\n", "\n", "b"}));
  EXPECT_EQ(words(gpt2, "\t x"), (Words{"\t", " x"}));
  EXPECT_EQ(words(gpt2, ""), Words{});
}

TEST(Gpt2PreTokenizer, InvalidUtf8IsItsOwnPiece) {
  const PreTokenizer gpt2 = PreTokenizer::gpt2();
  EXPECT_EQ(words(gpt2,
                  "ab\xff"
                  "cd"),
            (Words{"ab", "\xff", "cd"}));
  EXPECT_EQ(words(gpt2, " \xc3"), (Words{" ", "\xc3"}));  // a truncated sequence at the end
  // An overlong encoding and a lone continuation byte are invalid too.
  EXPECT_EQ(words(gpt2, "x\xc0\xafy\x80"), (Words{"x", "\xc0\xaf", "y", "\x80"}));
  // A surrogate half (ED A0 80) is not UTF-8.
  EXPECT_EQ(words(gpt2, "é\xed\xa0\x80é"), (Words{"é", "\xed\xa0\x80", "é"}));
}

TEST(Gpt2PreTokenizer, LongRunsSplitQuickly) {
  // One word a megabyte long (a file of one letter, or of spaces) must neither fail nor crawl.
  const PreTokenizer gpt2 = PreTokenizer::gpt2();
  const auto start = std::chrono::steady_clock::now();
  for (const char c : {'a', ' ', '\n', '7', '!'}) {
    const std::string text(1 << 20, c);
    const std::vector<Piece> pieces = gpt2.words(text);
    size_t covered = 0;
    for (const Piece& p : pieces) covered += p.end - p.begin;
    EXPECT_EQ(covered, text.size()) << "runs of '" << c << "'";
    EXPECT_LE(pieces.size(), 2u) << "runs of '" << c << "'";
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(Llama3PreTokenizer, Splits) {
  const PreTokenizer llama = pattern(kLlama3Pattern);
  // Contractions in any case; at most three digits a piece; a punctuation mark leads a word.
  EXPECT_EQ(words(llama, "DON'T 1234567"), (Words{"DON", "'T", " ", "123", "456", "7"}));
  EXPECT_EQ(words(llama, "(hello) x\n\n  y"), (Words{"(hello", ")", " x", "\n\n", " ", " y"}));
  EXPECT_EQ(words(llama,
                  "ab\xfe"
                  "cd"),
            (Words{"ab", "\xfe", "cd"}));
}

TEST(SplitRegex, SequencesAndEmptyMatches) {
  // Digits then GPT-2's pattern (SmolLM2's): each digit alone.
  std::vector<SplitRegex> steps;
  steps.emplace_back(R"(\p{N})", false, "digits");
  steps.emplace_back(tokenizers::kGpt2Pattern, false, "gpt2");
  EXPECT_EQ(words(PreTokenizer(std::move(steps)), "in 2024, ok"),
            (Words{"in", " ", "2", "0", "2", "4", ",", " ok"}));
  // A pattern that matches empty strings: the text between is kept, nothing empty is given.
  EXPECT_EQ(words(pattern("x*"), "abxxc"), (Words{"a", "b", "xx", "c"}));
  // A literal string.
  std::vector<SplitRegex> literal;
  literal.emplace_back("a.", true, "literal");
  EXPECT_EQ(words(PreTokenizer(std::move(literal)), "aba.c"), (Words{"ab", "a.", "c"}));
}

TEST(SplitRegex, BadPatternIsNamed) {
  try {
    SplitRegex bad("(unclosed", false, "tokenizer.json: pre_tokenizer");
    FAIL() << "compiled";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("tokenizer.json: pre_tokenizer: pattern '(unclosed' does not compile"),
              std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace vkgrad::test
