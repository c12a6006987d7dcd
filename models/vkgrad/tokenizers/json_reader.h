// Reading tokenizer.json's members with errors that name the file and the member's path
// ("tok/tokenizer.json: model.merges[3]: must be ..."); shared by the readers of its parts.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/bpe.h"

namespace vkgrad::tokenizers {

// std::map objects: a vocabulary of 150,000 keys is looked up, not kept in file order (the
// ordered kind searches its keys one by one).
using Json = nlohmann::json;

// The largest tokenizer.json read: today's biggest vocabularies make files of tens of MB.
constexpr uint64_t kMaxFileBytes = uint64_t(1) << 30;

// The reading context: the file and the path of the member being read ("model.merges[3]").
struct Reader {
  std::string where;

  [[noreturn]] void fail(const std::string& path, const std::string& problem) const {
    throw Error(where + ": " + path + ": " + problem);
  }
  const Json* member(const Json& object, const std::string& path, const char* key) const {
    if (!object.is_object()) fail(path, "must be an object, got " + object.dump());
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &*it;
  }
  bool flag(const Json& object, const std::string& path, const char* key, bool fallback) const {
    const Json* value = member(object, path, key);
    if (!value || value->is_null()) return fallback;
    if (!value->is_boolean()) fail(path + "." + key, "must be true or false");
    return value->get<bool>();
  }
  std::string string(const Json& value, const std::string& path) const {
    if (!value.is_string()) fail(path, "must be a string, got " + value.dump());
    return value.get<std::string>();
  }
  uint32_t id(const Json& value, const std::string& path) const {
    if (!value.is_number_unsigned() || value.get<uint64_t>() > kMaxTokenId)
      fail(path,
           "must be a token id in [0, " + std::to_string(kMaxTokenId) + "], got " + value.dump());
    return uint32_t(value.get<uint64_t>());
  }
  // A component's "type", "none" for null or absent.
  std::string type(const Json* component, const std::string& path) const {
    if (!component || component->is_null()) return "none";
    const Json* type = member(*component, path, "type");
    if (!type) fail(path, "has no \"type\"");
    return string(*type, path + ".type");
  }
  [[noreturn]] void unsupported(const std::string& path, const std::string& what) const {
    fail(path, what + " is not supported (vkgrad runs BPE tokenizers, byte-level as GPT-2's, " +
                   "Llama 3's, Qwen2's and SmolLM2's, or SentencePiece-style as Llama 2's, " +
                   "TinyLlama's and Mistral's)");
  }
};

}  // namespace vkgrad::tokenizers
