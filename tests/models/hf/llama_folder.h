// Small random Llama and Qwen2 models written in the Hugging Face layout, and a CPU reference
// forward pass that reads the same tensors by the folder's names (nn.Linear weights (out, in),
// q, k, v, gate and up apart): independent of vkgrad's mapping (hf/llama.h), which fuses and
// transposes them, so a slip in either shows.
#pragma once

#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::test {

class Rng;

// A tensor by the folder's name: its shape and row-major values.
struct HfArray {
  std::vector<int64_t> shape;
  std::vector<float> values;
};
using HfArrays = std::map<std::string, HfArray>;

struct LlamaFolderOptions {
  bool qwen2 = false;     // model_type "qwen2" (q, k, v biases), else "llama"
  bool inv_freq = false;  // the rotary-frequency buffers older files carry, written too
  ops::DType dtype = ops::DType::F32;
};

// The config.json of c (c.llama set). llama: attention_bias = c.llama->qkv_bias (which must
// equal proj_bias); qwen2: qkv_bias must be true and proj_bias false.
graph::Json llamaConfigJson(const gpt::GptConfig& c, bool qwen2);
// Random weights of c by the folder's names, N(0, 0.3) (RMSNorm gains around 1); lm_head
// only when c is untied.
HfArrays randomLlamaWeights(const gpt::GptConfig& c, Rng& rng);
// Writes DIR/config.json, model.safetensors and the small tokenizer (gpt2_folder.h).
void writeLlamaFolder(const std::filesystem::path& dir, const gpt::GptConfig& c,
                      const HfArrays& weights, const LlamaFolderOptions& options = {});

// The model's logits for one window, ids (T) -> (T, vocab) row-major: straightforward loops,
// accumulated in double.
std::vector<float> llamaReferenceLogits(const gpt::GptConfig& c, const HfArrays& weights,
                                        std::span<const uint32_t> ids);

}  // namespace vkgrad::test
