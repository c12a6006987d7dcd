// A Hugging Face model folder as vkgrad runs it: config.json's model type picks the
// architecture's reader (gpt2.h, llama.h), which maps the folder's weights onto a vkgrad
// model: a GPT, or a Llama (a GptConfig with llama set, llama/llama.h). The tokenizer is read apart
// (tokenizers/tokenizer.h, loadTokenizer on the same folder).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/hf/config.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::hf {

struct HfModel {
  ModelType type = ModelType::Gpt2;
  gpt::GptConfig gpt;  // the model vkgrad builds (declareGpt, gptLogits); llama and qwen2 set
                       // gpt.llama
  // Its parameters by vkgrad's names, as declareGpt declares them, in the file's formats.
  std::vector<graph::SavedTensor> parameters;
  // The float format every weight is stored in, or F32 when they differ.
  ops::DType stored = ops::DType::F32;
};

// Reads config.json and the weights. Throws Error naming the file and the problem
// (readHfConfig, readHfWeights, gpt2Config and gpt2Parameters say which); nothing is
// allocated on a device.
HfModel readHfModel(const std::filesystem::path& dir);

// Declares the model in store (an empty one), and uploads its weights. With `frozen`, every
// parameter is frozen and, when the folder stores them all in F16 or BF16, kept in that format
// on the device (ParameterStore::setStorage: half the memory, the file's values exactly);
// otherwise they are f32 as training needs. Throws what the store throws.
void loadHfModel(graph::ParameterStore& store, const HfModel& model, bool frozen);
// loadHfModel without the upload: the parameters declared (frozen and stored as it says), for
// a caller that adds its own before uploading them all (hf/lora.h).
void declareHfModel(graph::ParameterStore& store, const HfModel& model, bool frozen);

// The files of a folder's tokenizer that a saved folder copies, where the source has them.
inline constexpr const char* kTokenizerFiles[] = {"tokenizer.json", "vocab.json", "merges.txt",
                                                  "tokenizer_config.json",
                                                  "special_tokens_map.json"};

// Writes the model in `store` (declared by loadHfModel from `source`, then trained) into out in
// the Hugging Face layout, so that PyTorch and readHfModel read it: model.safetensors in f32
// under the architecture's names (gpt2Weights, llamaWeights), source's config.json with
// "torch_dtype" "float32", and source's tokenizer files, each written atomically
// (io/atomic_file.h). Returns the names of the files written. Throws Error naming the file that
// cannot be read or written.
std::vector<std::string> saveHfModel(const std::filesystem::path& out,
                                     const std::filesystem::path& source,
                                     const gpt::GptConfig& config,
                                     const graph::ParameterStore& store);
// The same from parameters by vkgrad's names (a store's download(), nn::mergeLora's result).
std::vector<std::string> saveHfModel(const std::filesystem::path& out,
                                     const std::filesystem::path& source,
                                     const gpt::GptConfig& config,
                                     const std::vector<graph::SavedTensor>& parameters);

}  // namespace vkgrad::hf
