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
  Json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""},
                {"fuse_unk", false},
                {"byte_fallback", false}};
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
