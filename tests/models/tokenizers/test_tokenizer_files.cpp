// Reading tokenizers from files: tokenizer.json (merges as strings and as pairs) and GPT-2's
// vocab.json with merges.txt give the same ids; Llama 3's and SmolLM2's pre-tokenizers read
// from tokenizer.json; what vkgrad does not support is refused by name; files that do not
// parse are named.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "models/tokenizers/small_bpe.h"
#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/bpe_trainer.h"
#include "vkgrad/tokenizers/gpt2_files.h"
#include "vkgrad/tokenizers/tokenizer_json.h"
#include "vkgrad/tokenizers/tokenizer_writer.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using graph::Json;
using tokenizers::AddedToken;
using tokenizers::Tokenizer;
using Ids = std::vector<uint32_t>;

class TokenizerFiles : public TempDirTest {
 protected:
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name, std::ios::binary) << text;
  }
  // What parsing `json` says, or "" when it is accepted.
  static std::string error(const Json& json) {
    try {
      tokenizers::parseTokenizerJson(graph::dumpJson(json), "tok/tokenizer.json");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  // A trained vocabulary with GPT-2's end-of-text token after it.
  void SetUp() override {
    TempDirTest::SetUp();
    const tokenizers::TrainedBpe trained = tokenizers::trainBpe(licenceText(40000), 300);
    spec_ = trained.spec();
    const uint32_t eot = uint32_t(spec_.vocab.size());
    spec_.vocab.emplace_back("<|endoftext|>", eot);
    added_ = {{"<|endoftext|>", eot, true}};
  }
  tokenizers::BpeSpec spec_;
  std::vector<AddedToken> added_;
};

TEST_F(TokenizerFiles, BothFormatsGiveTheSameIds) {
  write("tokenizer.json", graph::dumpJson(tokenizerJson(spec_, added_)));
  write("pairs.json", graph::dumpJson(tokenizerJson(spec_, added_, /*merges_as_pairs=*/true)));
  write("vocab.json", tokenizers::vocabJson(spec_));
  write("merges.txt", tokenizers::mergesTxt(spec_));
  const Tokenizer json = tokenizers::readTokenizerJson(dir_ / "tokenizer.json");
  const Tokenizer pairs = tokenizers::readTokenizerJson(dir_ / "pairs.json");
  const Tokenizer gpt2 = tokenizers::readGpt2Files(dir_ / "vocab.json", dir_ / "merges.txt");
  const Tokenizer folder = tokenizers::loadTokenizer(dir_);  // tokenizer.json first
  const std::string text = licenceText(8000) + "<|endoftext|>naïve \xff\xfe 東京 it's 2024";
  const Ids ids = json.encode(text);
  EXPECT_EQ(pairs.encode(text), ids);
  EXPECT_EQ(gpt2.encode(text), ids);
  EXPECT_EQ(folder.encode(text), ids);
  EXPECT_EQ(gpt2.decode(ids), text);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), added_[0].id), 1);
  // Without tokenizer.json the folder's GPT-2 files are read.
  fs::remove(dir_ / "tokenizer.json");
  EXPECT_EQ(tokenizers::loadTokenizer(dir_).encode(text), ids);
}

TEST_F(TokenizerFiles, Llama3AndSmolLM2PreTokenizers) {
  Json llama = tokenizerJson(spec_, added_);
  llama["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern",
          {{"Regex",
            R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}}},
         {"behavior", "Isolated"},
         {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const uint32_t bos = added_[0].id;  // standing in for <|begin_of_text|>
  llama["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens",
       {{"<|endoftext|>",
         {{"id", "<|endoftext|>"}, {"ids", {bos}}, {"tokens", {"<|endoftext|>"}}}}}}};
  const Tokenizer t = tokenizers::parseTokenizerJson(graph::dumpJson(llama), "llama");
  ASSERT_EQ(t.preTokenizer().steps().size(), 1u);
  EXPECT_EQ(t.postTemplate().prefix, Ids{bos});
  EXPECT_TRUE(t.postTemplate().suffix.empty());
  // "1234567": three digits at most per word, so no merge joins "3" and "4".
  const Ids ids = t.encode("1234567");
  Ids pieces;
  for (const char* part : {"123", "456", "7"})
    for (const uint32_t id : t.encode(part)) pieces.push_back(id);
  EXPECT_EQ(ids, pieces);
  EXPECT_EQ(t.decode(ids), "1234567");

  Json smol = tokenizerJson(spec_, added_);
  smol["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Digits"}, {"individual_digits", true}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  const Tokenizer s = tokenizers::parseTokenizerJson(graph::dumpJson(smol), "smol");
  EXPECT_EQ(s.preTokenizer().steps().size(), 2u);
  EXPECT_EQ(s.encode("2024"), (Ids{'2', '0', '2', '4'}));
}

TEST_F(TokenizerFiles, NfcNormalizer) {
  // Qwen2's normalizer: decomposed text encodes as its composed form does.
  for (const Json& normalizer :
       {Json{{"type", "NFC"}}, Json{{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}}}) {
    Json qwen = tokenizerJson(spec_, added_);
    qwen["normalizer"] = normalizer;
    const Tokenizer t = tokenizers::parseTokenizerJson(graph::dumpJson(qwen), "qwen");
    EXPECT_EQ(t.normalization(), tokenizers::Normalization::Nfc);
    const Ids composed = t.encode("the caf\xc3\xa9 licence");
    EXPECT_EQ(t.encode("the cafe\xcc\x81 licence"), composed);
    EXPECT_EQ(t.decode(composed), "the caf\xc3\xa9 licence");
    // Text already in NFC, and bytes that are not UTF-8, still round-trip exactly.
    const std::string mixed = "na\xc3\xafve \xff\xfe<|endoftext|>\xe6\x9d\xb1 GPL";
    EXPECT_EQ(t.decode(t.encode(mixed)), mixed);
  }
}

TEST_F(TokenizerFiles, UnsupportedIsRefusedByName) {
  const Json base = tokenizerJson(spec_, added_);
  const auto refused = [&](const char* pointer, const Json& value, const std::string& expected) {
    Json j = base;
    j[Json::json_pointer(pointer)] = value;
    const std::string what = error(j);
    EXPECT_NE(what.find(expected), std::string::npos) << pointer << ": " << what;
    EXPECT_EQ(what.rfind("tok/tokenizer.json: ", 0), 0u) << what;
  };
  refused("/model/type", "WordPiece", "model: type WordPiece is not supported");
  refused("/model/type", "Unigram", "model: type Unigram is not supported");
  refused("/normalizer", {{"type", "Lowercase"}},
          "normalizer: normalizer Lowercase (only NFC) is not supported");
  refused("/normalizer",
          {{"type", "Sequence"}, {"normalizers", {{{"type", "Prepend"}}, {{"type", "Replace"}}}}},
          "normalizer Sequence Prepend Replace (only NFC) is not supported");
  refused("/pre_tokenizer", {{"type", "Metaspace"}}, "pre_tokenizer: type Metaspace is not");
  refused("/pre_tokenizer", {{"type", "Whitespace"}}, "pre_tokenizer: type Whitespace is not");
  refused("/pre_tokenizer", nullptr, "a pre-tokenizer without ByteLevel");
  refused("/pre_tokenizer/add_prefix_space", true, "pre_tokenizer.add_prefix_space: true is not");
  refused("/decoder", {{"type", "WordPiece"}},
          "decoder: type WordPiece (only ByteLevel, or SentencePiece");
  refused("/model/dropout", 0.1, "model.dropout: BPE dropout (0.1) is not supported");
  refused("/model/byte_fallback", true,
          "model.byte_fallback: byte fallback with a ByteLevel decoder is not supported");
  refused("/truncation", {{"max_length", 8}}, "truncation: truncation");
  refused("/post_processor", {{"type", "BertProcessing"}}, "post_processor: type BertProcessing");
  refused("/post_processor", {{"type", "TemplateProcessing"}, {"single", Json::array()}},
          "post_processor.single: must hold the text");
  refused("/added_tokens/0/lstrip", true, "added_tokens[0].lstrip: '<|endoftext|>' with lstrip");
  Json split = base;
  split["pre_tokenizer"] = {{"type", "Split"},
                            {"pattern", {{"Regex", "\\s"}}},
                            {"behavior", "MergedWithPrevious"},
                            {"invert", false}};
  EXPECT_NE(error(split).find("behaviour \"MergedWithPrevious\" (only \"Isolated\")"),
            std::string::npos)
      << error(split);
}

TEST_F(TokenizerFiles, MalformedFilesAreNamed) {
  const Json base = tokenizerJson(spec_, added_);
  const auto fails = [&](const Json& j, const std::string& expected) {
    const std::string what = error(j);
    EXPECT_NE(what.find(expected), std::string::npos) << what;
  };
  Json merge = base;
  merge["model"]["merges"][3] = "one";
  fails(merge, "model.merges[3]: must be two tokens separated by one space, got \"one\"");
  Json pair = base;
  pair["model"]["merges"][0] = Json::array({"a", "b", "c"});
  fails(pair, "model.merges[0]: must be two tokens");
  Json id = base;
  id["model"]["vocab"]["a"] = -1;
  fails(id, "model.vocab[\"a\"]: must be a token id");
  Json vocab = base;
  vocab["model"]["vocab"] = Json::array();
  fails(vocab, "model.vocab: must be an object of token ids");

  write("tokenizer.json", "{\"model\": ");
  try {
    tokenizers::loadTokenizer(dir_);
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "tokenizer.json").string() + ": invalid JSON"),
              std::string::npos)
        << e.what();
  }
  fs::remove(dir_ / "tokenizer.json");
  write("vocab.json", tokenizers::vocabJson(spec_));
  write("merges.txt", "#version: 0.2\nĠ t\nbad line here\n");
  try {
    tokenizers::loadTokenizer(dir_);
    FAIL() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir_ / "merges.txt").string() +
                                         ": line 3: a merge must be two tokens"),
              std::string::npos)
        << e.what();
  }
  fs::remove(dir_ / "merges.txt");
  fs::remove(dir_ / "vocab.json");
  try {
    tokenizers::loadTokenizer(dir_);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no tokenizer (neither tokenizer.json nor vocab.json"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace vkgrad::test
