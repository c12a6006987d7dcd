#include "vkgrad/tokenizers/tokenizer_writer.h"

#include <algorithm>

namespace vkgrad::tokenizers {
namespace {

using graph::Json;

Json vocabObject(const BpeSpec& spec) {
  auto vocab = spec.vocab;
  std::sort(vocab.begin(), vocab.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  // Appended to the object's list directly: its operator[] looks for the key among those before,
  // which a vocabulary of 100,000 tokens would make quadratic (the texts are distinct already).
  Json object = Json::object();
  auto& members = static_cast<Json::object_t::Container&>(object.get_ref<Json::object_t&>());
  members.reserve(vocab.size());
  for (const auto& [text, id] : vocab) members.emplace_back(text, id);
  return object;
}

Json byteLevel(bool add_prefix_space, bool trim_offsets) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", true}};
}

// Llama 2's normalizer, decoder and post-processor (<s> first, where it is an added token).
void sentencePieceParts(std::span<const AddedToken> added, Json& root) {
  root["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", "▁"}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "▁"}}}}};
  root["pre_tokenizer"] = nullptr;
  root["post_processor"] = nullptr;
  for (const AddedToken& t : added)
    if (t.content == "<s>")
      root["post_processor"] = {
          {"type", "TemplateProcessing"},
          {"single",
           {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
            {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
          {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {t.id}}, {"tokens", {"<s>"}}}}}}};
  root["decoder"] = {{"type", "Sequence"},
                     {"decoders",
                      {{{"type", "Replace"}, {"pattern", {{"String", "▁"}}}, {"content", " "}},
                       {{"type", "ByteFallback"}},
                       {{"type", "Fuse"}},
                       {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
}

}  // namespace

Json tokenizerJson(const BpeSpec& spec, std::span<const AddedToken> added, bool merges_as_pairs) {
  Json tokens = Json::array();
  for (const AddedToken& t : added)
    tokens.push_back({{"id", t.id},
                      {"content", t.content},
                      {"single_word", false},
                      {"lstrip", false},
                      {"rstrip", false},
                      {"normalized", !t.special},
                      {"special", t.special}});
  Json merges = Json::array();
  for (const auto& [left, right] : spec.merges)
    merges.push_back(merges_as_pairs ? Json::array({left, right}) : Json(left + " " + right));
  const bool pieces = spec.alphabet == BpeAlphabet::Characters;
  Json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", spec.unk_token.empty() ? Json() : Json(spec.unk_token)},
                {"continuing_subword_prefix", pieces ? Json() : Json("")},
                {"end_of_word_suffix", pieces ? Json() : Json("")},
                {"fuse_unk", spec.fuse_unk},
                {"byte_fallback", spec.byte_fallback}};
  if (spec.ignore_merges) model["ignore_merges"] = true;
  model["vocab"] = vocabObject(spec);
  model["merges"] = std::move(merges);
  // The members in the order Hugging Face writes them (GPT-2's file).
  Json root = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}};
  root["added_tokens"] = std::move(tokens);
  root["normalizer"] = nullptr;
  root["pre_tokenizer"] = byteLevel(false, true);
  root["post_processor"] = byteLevel(true, false);
  root["decoder"] = byteLevel(true, true);
  if (pieces) sentencePieceParts(added, root);
  root["model"] = std::move(model);
  return root;
}

std::string vocabJson(const BpeSpec& spec) {
  return graph::dumpJson(vocabObject(spec));
}

std::string mergesTxt(const BpeSpec& spec) {
  std::string text = "#version: 0.2\n";
  for (const auto& [left, right] : spec.merges) text += left + " " + right + "\n";
  return text;
}

}  // namespace vkgrad::tokenizers
