#include "models/tokenizers/small_sentencepiece.h"

#include <cstdio>
#include <utility>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/tokenizer_writer.h"

namespace vkgrad::test {
namespace {

const std::vector<std::string> kPieces = {
    "▁",      "h",  "e",  "l",    "o",      "w",  "r",  "d",    "é",   // 259..267
    "▁h",     "el", "lo", "▁hel", "▁hello", "▁w", "or", "▁wor", "ld",  // 268..276
    "▁world", "▁▁", "d▁"};                                             // 277..279

// In rank order. "d ▁" crosses a space: only an unsplit text can use it.
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"▁", "h"}, {"e", "l"},   {"l", "o"}, {"▁h", "el"},   {"▁hel", "lo"}, {"▁", "w"},
    {"o", "r"}, {"▁w", "or"}, {"l", "d"}, {"▁wor", "ld"}, {"▁", "▁"},     {"d", "▁"}};

}  // namespace

uint32_t spmId(const std::string& piece) {
  for (size_t i = 0; i < kPieces.size(); ++i)
    if (kPieces[i] == piece) return 259 + uint32_t(i);
  throw Error("no piece " + piece);
}

graph::Json sentencePieceJson(SentencePieceForm form, bool byte_fallback) {
  tokenizers::BpeSpec spec;
  spec.alphabet = tokenizers::BpeAlphabet::Characters;
  spec.byte_fallback = byte_fallback;
  spec.unk_token = "<unk>";
  spec.fuse_unk = true;
  spec.vocab = {{"<unk>", kSpmUnk}, {"<s>", kSpmBos}, {"</s>", kSpmEos}};
  for (int b = 0; b < 256 && byte_fallback; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    spec.vocab.emplace_back(name, spmByteId(uint8_t(b)));
  }
  for (const std::string& piece : kPieces) spec.vocab.emplace_back(piece, spmId(piece));
  spec.merges = kMerges;
  const std::vector<tokenizers::AddedToken> added{
      {"<unk>", kSpmUnk, true}, {"<s>", kSpmBos, true}, {"</s>", kSpmEos, true}};
  graph::Json j = tokenizers::tokenizerJson(spec, added);  // Llama 2's, the normalizer form
  if (form != SentencePieceForm::Normalizer) {
    const bool first = form == SentencePieceForm::MetaspaceFirst;
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {{"type", "Metaspace"},
                          {"replacement", "▁"},
                          {"prepend_scheme", first ? "first" : "always"},
                          {"split", first}};
  }
  return j;
}

}  // namespace vkgrad::test
