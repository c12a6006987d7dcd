// A trained GPT on disk, as `vkgrad-gpt train --out DIR` writes it and `sample` reads it:
//   DIR/config.json        the GptConfig, the vocabulary and a record of the training run
//   DIR/model.safetensors  the parameters (io/safetensors.h; ParameterStore::save)
//   DIR/train_state.safetensors  what `train --resume` continues from (apps/common/resume.h)
// config.json: {"format": "vkgrad-gpt", "version": 1, "model": {"vocab", "layers", "heads",
// "width", "context", "norm", "tie_weights", "activation", "activation_param", "dropout"},
// "vocab_bytes": [byte values, increasing], "training": {...}}.
#pragma once

#include <filesystem>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/vocab.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::gpt {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kModelFile = "model.safetensors";

struct GptCheckpoint {
  GptConfig config;
  ByteVocab vocab;
  graph::Json training = graph::Json::object();  // informational: steps, losses, data file, ...
};

// Writes DIR/config.json atomically. Throws Error when config.vocab != vocab.size().
void writeConfig(const std::filesystem::path& dir, const GptCheckpoint& checkpoint);
// Reads DIR/config.json. Throws Error "<path>: <problem>" for a missing directory or file,
// invalid JSON, another format or version, a missing or invalid field, or a vocabulary whose
// size disagrees with the model's. Reads what every earlier vkgrad-gpt wrote.
GptCheckpoint readConfig(const std::filesystem::path& dir);

}  // namespace vkgrad::gpt
