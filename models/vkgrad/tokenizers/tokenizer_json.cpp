#include "vkgrad/tokenizers/tokenizer_json.h"

#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "vkgrad/core/error.h"
#include "vkgrad/io/input_file.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/tokenizers/json_reader.h"
#include "vkgrad/tokenizers/sentencepiece_json.h"

namespace vkgrad::tokenizers {
namespace {

std::pair<std::string, std::string> readMerge(const Reader& r, const Json& merge,
                                              const std::string& path) {
  if (merge.is_array()) {
    if (merge.size() != 2) r.fail(path, "must be two tokens, got " + merge.dump());
    return {r.string(merge[0], path + "[0]"), r.string(merge[1], path + "[1]")};
  }
  const std::string line = r.string(merge, path);
  const size_t space = line.find(' ');
  if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
    r.fail(path, "must be two tokens separated by one space, got \"" + line + "\"");
  return {line.substr(0, space), line.substr(space + 1)};
}

// The BPE model; `pieces`: the tokenizer is SentencePiece-style, its vocabulary in characters
// with byte fallback or an unknown token.
BpeSpec readModel(const Reader& r, const Json* model, bool pieces) {
  const std::string type = r.type(model, "model");
  if (type != "BPE") r.unsupported("model", "type " + type);
  if (const Json* dropout = r.member(*model, "model", "dropout"); dropout && !dropout->is_null())
    r.unsupported("model.dropout", "BPE dropout (" + dropout->dump() + ")");
  BpeSpec spec;
  if (pieces) {
    spec.alphabet = BpeAlphabet::Characters;
    spec.byte_fallback = r.flag(*model, "model", "byte_fallback", false);
    spec.fuse_unk = r.flag(*model, "model", "fuse_unk", false);
    if (const Json* unk = r.member(*model, "model", "unk_token"); unk && !unk->is_null())
      spec.unk_token = r.string(*unk, "model.unk_token");
  } else if (r.flag(*model, "model", "byte_fallback", false)) {
    r.unsupported("model.byte_fallback", "byte fallback with a ByteLevel decoder");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const Json* value = r.member(*model, "model", affix);
    if (value && !value->is_null() && *value != "")
      r.unsupported(std::string("model.") + affix, value->dump());
  }
  spec.ignore_merges = r.flag(*model, "model", "ignore_merges", false);
  const Json* vocab = r.member(*model, "model", "vocab");
  if (!vocab || !vocab->is_object()) r.fail("model.vocab", "must be an object of token ids");
  spec.vocab.reserve(vocab->size());
  for (const auto& [text, id] : vocab->items())
    spec.vocab.emplace_back(text, r.id(id, "model.vocab[\"" + text + "\"]"));
  const Json* merges = r.member(*model, "model", "merges");
  if (!merges || !merges->is_array()) r.fail("model.merges", "must be an array");
  spec.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i)
    spec.merges.push_back(readMerge(r, (*merges)[i], "model.merges[" + std::to_string(i) + "]"));
  return spec;
}

// One pre-tokenizer of the sequence, its splits appended to steps; `byte_level` is set when it
// was the ByteLevel one.
void readPreTokenizer(const Reader& r, const Json& config, const std::string& path,
                      std::vector<SplitRegex>& steps, bool& byte_level) {
  const std::string type = r.type(&config, path);
  if (byte_level) r.unsupported(path, type + " after ByteLevel");
  if (type == "Sequence") {
    const Json* list = r.member(config, path, "pretokenizers");
    if (!list || !list->is_array()) r.fail(path + ".pretokenizers", "must be an array");
    for (size_t i = 0; i < list->size(); ++i)
      readPreTokenizer(r, (*list)[i], path + ".pretokenizers[" + std::to_string(i) + "]", steps,
                       byte_level);
  } else if (type == "ByteLevel") {
    if (r.flag(config, path, "add_prefix_space", true))
      r.unsupported(path + ".add_prefix_space", "true");
    if (r.flag(config, path, "use_regex", true))
      steps.emplace_back(kGpt2Pattern, false, r.where + ": " + path);
    byte_level = true;
  } else if (type == "Split") {
    const Json* behavior = r.member(config, path, "behavior");
    if (!behavior || *behavior != "Isolated")
      r.unsupported(path + ".behavior",
                    "behaviour " + (behavior ? behavior->dump() : "none") + " (only \"Isolated\")");
    if (r.flag(config, path, "invert", false)) r.unsupported(path + ".invert", "true");
    const Json* pattern = r.member(config, path, "pattern");
    if (!pattern) r.fail(path, "has no \"pattern\"");
    const Json* regex = r.member(*pattern, path + ".pattern", "Regex");
    const Json* literal = r.member(*pattern, path + ".pattern", "String");
    if (!regex == !literal) r.fail(path + ".pattern", "must hold one of \"Regex\" or \"String\"");
    const std::string text = r.string(regex ? *regex : *literal, path + ".pattern");
    steps.emplace_back(text, literal != nullptr, r.where + ": " + path);
  } else if (type == "Digits") {
    // Rust's char::is_numeric is Unicode's N categories: each digit alone, or each run.
    const bool single = r.flag(config, path, "individual_digits", false);
    steps.emplace_back(single ? R"(\p{N})" : R"(\p{N}+)", false, r.where + ": " + path);
  } else {
    r.unsupported(path, "type " + type);
  }
}

PreTokenizer readPreTokenizers(const Reader& r, const Json* config) {
  std::vector<SplitRegex> steps;
  bool byte_level = false;
  if (config && !config->is_null())
    readPreTokenizer(r, *config, "pre_tokenizer", steps, byte_level);
  if (!byte_level)
    r.unsupported("pre_tokenizer", "a pre-tokenizer without ByteLevel (" +
                                       (config ? config->dump().substr(0, 80) : "none") + ")");
  return PreTokenizer(std::move(steps));
}

std::vector<AddedToken> readAddedTokens(const Reader& r, const Json* list) {
  std::vector<AddedToken> added;
  if (!list || list->is_null()) return added;
  if (!list->is_array()) r.fail("added_tokens", "must be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    const Json& entry = (*list)[i];
    const Json* id = r.member(entry, path, "id");
    const Json* content = r.member(entry, path, "content");
    if (!id || !content) r.fail(path, "must have an \"id\" and a \"content\"");
    AddedToken token{r.string(*content, path + ".content"), r.id(*id, path + ".id"),
                     r.flag(entry, path, "special", false)};
    for (const char* option : {"single_word", "lstrip", "rstrip"})
      if (r.flag(entry, path, option, false))
        r.unsupported(path + "." + option, "'" + token.content + "' with " + option + " true");
    added.push_back(std::move(token));
  }
  return added;
}

void checkDecoder(const Reader& r, const Json* decoder) {
  const std::string type = r.type(decoder, "decoder");
  if (type != "ByteLevel")
    r.unsupported("decoder", "type " + type +
                                 " (only ByteLevel, or SentencePiece's Sequence "
                                 "or Metaspace)");
}

Normalization readNormalizer(const Reader& r, const Json* normalizer) {
  if (!normalizer || normalizer->is_null()) return Normalization::None;
  std::string type = r.type(normalizer, "normalizer");
  if (type == "NFC") return Normalization::Nfc;
  if (type == "Sequence") {
    const Json* list = r.member(*normalizer, "normalizer", "normalizers");
    if (list && list->is_array() && list->empty()) return Normalization::None;
    if (list && list->is_array() && list->size() == 1 && r.type(&(*list)[0], "normalizer") == "NFC")
      return Normalization::Nfc;
    if (list && list->is_array())
      for (const Json& inner : *list) type += " " + r.type(&inner, "normalizer.normalizers[]");
  }
  r.unsupported("normalizer", "normalizer " + type + " (only NFC)");
}

// The ids a TemplateProcessing post-processor puts around one text ("single": special tokens,
// then the text as "Sequence" A, then more special tokens); none for ByteLevel or none.
Template readPostProcessor(const Reader& r, const Json* processor) {
  const std::string type = r.type(processor, "post_processor");
  if (type == "none" || type == "ByteLevel") return {};
  if (type != "TemplateProcessing") r.unsupported("post_processor", "type " + type);
  const Json* single = r.member(*processor, "post_processor", "single");
  const Json* specials = r.member(*processor, "post_processor", "special_tokens");
  if (!single || !single->is_array()) r.fail("post_processor.single", "must be an array");
  Template result;
  bool text_seen = false;
  for (size_t i = 0; i < single->size(); ++i) {
    const std::string path = "post_processor.single[" + std::to_string(i) + "]";
    const Json& item = (*single)[i];
    if (const Json* sequence = r.member(item, path, "Sequence")) {
      const Json* id = r.member(*sequence, path + ".Sequence", "id");
      if (!id || *id != "A" || text_seen) r.fail(path, "must be the text once, as \"A\"");
      text_seen = true;
      continue;
    }
    const Json* special = r.member(item, path, "SpecialToken");
    const Json* name = special ? r.member(*special, path + ".SpecialToken", "id") : nullptr;
    if (!name) r.fail(path, "must be a \"Sequence\" or a \"SpecialToken\"");
    const std::string token = r.string(*name, path + ".SpecialToken.id");
    const std::string entry_path = "post_processor.special_tokens[\"" + token + "\"]";
    const Json* entry =
        specials ? r.member(*specials, "post_processor.special_tokens", token.c_str()) : nullptr;
    const Json* ids = entry ? r.member(*entry, entry_path, "ids") : nullptr;
    if (!ids || !ids->is_array()) r.fail(entry_path, "must list the token's \"ids\"");
    for (size_t k = 0; k < ids->size(); ++k)
      (text_seen ? result.suffix : result.prefix)
          .push_back(r.id((*ids)[k], entry_path + ".ids[" + std::to_string(k) + "]"));
  }
  if (!text_seen) r.fail("post_processor.single", "must hold the text (\"Sequence\" \"A\")");
  return result;
}

}  // namespace

Tokenizer parseTokenizerJson(std::string_view text, const std::string& where) {
  const Json root = graph::parseJsonMapped(text, where);
  const Reader r{where};
  if (!root.is_object()) r.fail("the top level", "must be an object");
  if (const Json* truncation = r.member(root, "", "truncation");
      truncation && !truncation->is_null())
    r.unsupported("truncation", "truncation (" + truncation->dump() + "; set it to null)");
  // The decoder tells the two kinds apart: ByteLevel, or SentencePiece's.
  const bool pieces = isSentencePiece(r, r.member(root, "", "decoder"));
  Normalization normalization = Normalization::None;
  PreTokenizer pre;
  std::optional<SentencePiece> sentence_piece;
  if (pieces) {
    // Another model (Unigram's T5 or ALBERT) is named before its normalizer is.
    if (const std::string type = r.type(r.member(root, "", "model"), "model"); type != "BPE")
      r.unsupported("model", "type " + type);
    sentence_piece = readSentencePiece(r, root);
  } else {
    normalization = readNormalizer(r, r.member(root, "", "normalizer"));
    pre = readPreTokenizers(r, r.member(root, "", "pre_tokenizer"));
    checkDecoder(r, r.member(root, "", "decoder"));
  }
  const Template post = readPostProcessor(r, r.member(root, "", "post_processor"));
  const BpeSpec spec = readModel(r, r.member(root, "", "model"), pieces);
  Tokenizer t(spec, std::move(pre), readAddedTokens(r, r.member(root, "", "added_tokens")), where,
              normalization);
  if (sentence_piece) t.setSentencePiece(*sentence_piece);
  for (const std::vector<uint32_t>* ids : {&post.prefix, &post.suffix})
    for (const uint32_t id : *ids)
      if (id >= t.size() || !(t.bpe().contains(id) || t.isAddedToken(id)))
        r.fail("post_processor", "token id " + std::to_string(id) + " is not in the vocabulary");
  t.setTemplate(post);
  return t;
}

Tokenizer readTokenizerJson(const std::filesystem::path& path) {
  return parseTokenizerJson(graph::readInputFile(path, "a tokenizer.json", kMaxFileBytes),
                            path.string());
}

}  // namespace vkgrad::tokenizers
