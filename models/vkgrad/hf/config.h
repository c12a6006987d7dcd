// A Hugging Face model folder's config.json: which architecture it holds ("model_type") and
// the document itself, for the architecture's own reader (gpt2.h, llama.h). The model types
// vkgrad runs are listed in ModelType; anything else is refused by name.
#pragma once

#include <filesystem>
#include <string>

#include "vkgrad/io/json_io.h"

namespace vkgrad::hf {

inline constexpr const char* kConfigFile = "config.json";

enum class ModelType { Gpt2, Llama, Qwen2 };
const char* modelTypeName(ModelType type);  // as config.json writes it: "gpt2", "llama", "qwen2"

struct HfConfig {
  ModelType type = ModelType::Gpt2;
  graph::Json json;   // the whole document
  std::string where;  // "<dir>/config.json", for errors
};

// True when DIR/config.json exists and is an object with a "model_type" string: a Hugging
// Face folder rather than a vkgrad checkpoint (whose config.json has "format"). Reads and
// parses the file; a file that does not parse counts as not a Hugging Face folder (the
// reader of the other format then says what is wrong with it).
bool isHfFolder(const std::filesystem::path& dir);

// Throws Error "<dir>: no such folder", "<dir>/config.json: missing", parse errors, or
// "<dir>/config.json: model_type \"bert\" is not supported (vkgrad runs gpt2, llama,
// qwen2)".
HfConfig readHfConfig(const std::filesystem::path& dir);

// Optional members of a config with Hugging Face's default when absent (or null, as
// "n_inner": null means the default). Each throws Error naming the key and what it holds when
// present with the wrong type or range.
int64_t configInt(const graph::Json& json, const std::string& key, int64_t fallback,
                  int64_t max = int64_t(1) << 31);
double configNumber(const graph::Json& json, const std::string& key, double fallback);
bool configBool(const graph::Json& json, const std::string& key, bool fallback);
std::string configString(const graph::Json& json, const std::string& key,
                         const std::string& fallback);

}  // namespace vkgrad::hf
