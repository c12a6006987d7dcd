#include "vkgrad/hf/config.h"

#include <system_error>

#include "vkgrad/core/error.h"

namespace vkgrad::hf {

namespace fs = std::filesystem;
using graph::Json;

const char* modelTypeName(ModelType type) {
  switch (type) {
    case ModelType::Gpt2:
      return "gpt2";
    case ModelType::Llama:
      return "llama";
    case ModelType::Qwen2:
      return "qwen2";
  }
  return "?";
}

bool isHfFolder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_regular_file(dir / kConfigFile, ec)) return false;
  try {
    const Json json = graph::readJsonFile(dir / kConfigFile);
    const auto t = json.is_object() ? json.find("model_type") : json.end();
    return json.is_object() && t != json.end() && t->is_string();
  } catch (const Error&) {
    return false;
  }
}

HfConfig readHfConfig(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": no such folder");
  HfConfig config;
  const fs::path path = dir / kConfigFile;
  config.where = path.string();
  if (!fs::is_regular_file(path, ec))
    throw Error(config.where + ": missing (a Hugging Face model folder has one)");
  config.json = graph::readJsonFile(path);
  if (!config.json.is_object()) throw Error(config.where + ": not a JSON object");
  const std::string type = configString(config.json, "model_type", "");
  try {
    if (type.empty()) throw Error("has no \"model_type\"");
    for (ModelType t : {ModelType::Gpt2, ModelType::Llama, ModelType::Qwen2})
      if (type == modelTypeName(t)) {
        config.type = t;
        return config;
      }
    throw Error("model_type \"" + type + "\" is not supported (vkgrad runs gpt2, llama, qwen2)");
  } catch (const Error& e) {
    throw Error(config.where + ": " + e.what());
  }
}

namespace {

// The member, or null when absent.
const Json* optional(const Json& json, const std::string& key) {
  const auto it = json.find(key);
  return it == json.end() || it->is_null() ? nullptr : &*it;
}

}  // namespace

int64_t configInt(const Json& json, const std::string& key, int64_t fallback, int64_t max) {
  const Json* v = optional(json, key);
  if (!v) return fallback;
  return int64_t(graph::jsonUint(*v, "\"" + key + "\"", uint64_t(max)));
}

double configNumber(const Json& json, const std::string& key, double fallback) {
  const Json* v = optional(json, key);
  if (!v) return fallback;
  if (!v->is_number()) throw Error("\"" + key + "\" must be a number, got " + graph::dumpJson(*v));
  return v->get<double>();
}

bool configBool(const Json& json, const std::string& key, bool fallback) {
  const Json* v = optional(json, key);
  if (!v) return fallback;
  if (!v->is_boolean())
    throw Error("\"" + key + "\" must be true or false, got " + graph::dumpJson(*v));
  return v->get<bool>();
}

std::string configString(const Json& json, const std::string& key, const std::string& fallback) {
  const Json* v = optional(json, key);
  if (!v) return fallback;
  if (!v->is_string()) throw Error("\"" + key + "\" must be a string, got " + graph::dumpJson(*v));
  return v->get<std::string>();
}

}  // namespace vkgrad::hf
