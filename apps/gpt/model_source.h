// What `vkgrad-gpt sample` and `eval` run: a checkpoint `vkgrad-gpt train` wrote (its byte
// vocabulary), or a Hugging Face model folder as downloaded (config.json with a model_type,
// the weights, and the folder's tokenizer: tokenizer.json, or vocab.json and merges.txt).
// Everything is read and checked on the CPU before a device is created.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/vocab.h"
#include "vkgrad/hf/lora.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::apps {

struct ModelSource {
  std::filesystem::path dir;
  gpt::GptConfig config;
  std::optional<gpt::ByteVocab> vocab;                     // a vkgrad-gpt checkpoint's
  std::shared_ptr<const tokenizers::Tokenizer> tokenizer;  // a Hugging Face folder's
  std::optional<hf::HfModel> hf;                           // its weights, read
  std::optional<hf::HfLora> lora;                          // a PEFT adapter on them, read

  bool huggingFace() const { return hf.has_value(); }
  // The ids of text: bytes (a checkpoint), or the folder's tokenizer, special tokens written
  // in the text included as Hugging Face's tokenizers encode them, inside the tokenizer's
  // template as the model saw texts in training (Llama's <s> or <|begin_of_text|> first; a
  // `prompt` to continue takes no suffix). A Hugging Face folder takes UTF-8 text only: Error
  // "<what> is not valid UTF-8 (byte N)" otherwise.
  std::vector<uint32_t> encode(std::string_view text, const std::string& what,
                               bool prompt = false) const;
  // Their text; ids past the tokenizer's (a padded vocabulary) stand for none and are skipped.
  // `continuation`: they follow text already shown, so a leading space is kept (a
  // SentencePiece decoder strips the one that starts a text).
  std::string decode(std::span<const uint32_t> ids, bool continuation = false) const;
};

// Reads DIR as a Hugging Face folder when its config.json has a model_type (hf::isHfFolder),
// else as a vkgrad-gpt checkpoint. A PEFT adapter folder (adapter_config.json, no config.json)
// stands for its base_model_name_or_path (a folder: absolute, or relative to the working
// directory or else to the adapter folder) with the adapters on; so does a Hugging Face DIR
// with an `adapter` folder. Throws Error naming the file and the problem, including a
// tokenizer with more ids than the model's vocabulary and an adapter of another model.
ModelSource readModelSource(const std::filesystem::path& dir,
                            const std::filesystem::path& adapter = {});

// The model's parameters on the device, frozen (sample and eval train nothing): a checkpoint's
// model.safetensors, or the folder's weights (16-bit ones kept in 16 bits: hf::loadHfModel),
// with its adapters where it has some (hf::loadHfLora).
// Throws Error when the checkpoint's file does not match its config.json.
std::unique_ptr<graph::ParameterStore> loadParameters(vk::Context& context,
                                                      const ModelSource& source);

}  // namespace vkgrad::apps
