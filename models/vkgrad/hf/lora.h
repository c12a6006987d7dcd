// LoRA fine-tuning of a Hugging Face model (the adapters themselves: nn/lora.h) and its
// adapters in PEFT's layout, which PyTorch's PEFT loads (PeftModel.from_pretrained):
//   DIR/adapter_config.json         {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r",
//                                    "lora_alpha", "target_modules": [...], "bias": "none",
//                                    "fan_in_fan_out", "base_model_name_or_path", ...}
//   DIR/adapter_model.safetensors   base_model.model.<module>.lora_A.weight (r, in) and
//                                   base_model.model.<module>.lora_B.weight (out, r), f32
// PEFT's lora_A and lora_B are nn.Linear layers whatever the base layer, sized from it: for
// GPT-2's Conv1D, whose weight is (in, out), PEFT takes in and out from that shape, so
// lora_A.weight is (r, in) and lora_B.weight (out, r) as for an nn.Linear base: the
// transposes of vkgrad's A (in, r) and B (r, out). PEFT forces fan_in_fan_out to true on a
// Conv1D target (and says so); the flag only makes its merge transpose B·A into the
// (in, out) Conv1D weight, and changes nothing stored. vkgrad writes it true for GPT-2 and
// reads either value.
//
// Targets are PEFT's target_modules: a name selects every product whose module name is it or
// ends with "." + it ("c_proj": attn.c_proj and mlp.c_proj). GPT-2's products are
// transformer.h.<i>.{attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj}; by default all four
// (the attention and MLP products; PEFT's own default for GPT-2 is c_attn alone).
//
// Llama and Qwen2 (hf/llama.h): model.layers.<i>.self_attn.{q,k,v,o}_proj and
// model.layers.<i>.mlp.{gate,up,down}_proj, nn.Linear layers (fan_in_fan_out false). vkgrad
// fuses q, k, v into one product and gate, up into another, so an adapter on q_proj is a
// column block of the fused product (nn/lora.h's blocks: the q columns, then k, then v; gate,
// then up), each with its own A and B as PEFT has them; o_proj and down_proj are whole
// products. By default all seven, as for GPT-2 every product (QLoRA's choice, the common one
// for instruction tuning; PEFT's own default for Llama and Qwen2 is q_proj and v_proj alone).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "vkgrad/hf/model.h"
#include "vkgrad/nn/lora.h"

namespace vkgrad::hf {

inline constexpr const char* kAdapterConfigFile = "adapter_config.json";
inline constexpr const char* kAdapterWeightsFile = "adapter_model.safetensors";

// A product LoRA may adapt: its module name as PEFT names it, its vkgrad prefix (nn/layers.h),
// the module's (in, out), and where the module is a column block of a fused product, its
// first column there (nn::declareLora's block; else nn::kWholeProduct).
struct HfLinear {
  std::string module, prefix;
  int64_t in = 0, out = 0;
  int64_t block = nn::kWholeProduct;
};
// Every product of the model that takes an adapter, in declaration order.
std::vector<HfLinear> hfLinears(const HfModel& model);
// The targets when none are named: GPT-2's c_attn, c_proj and c_fc; Llama's and Qwen2's
// q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj and down_proj.
std::vector<std::string> defaultLoraTargets(const HfModel& model);
// The products the targets select (PEFT's suffix rule). Throws Error naming a target that
// selects nothing (the model's module names given), or an empty list.
std::vector<HfLinear> selectLinears(const std::vector<HfLinear>& linears,
                                    const std::vector<std::string>& targets);

// An adapter set: its settings and, read from a folder, its values.
struct HfLora {
  nn::LoraConfig config;
  std::vector<std::string> targets;  // target_modules
  std::string base;                  // base_model_name_or_path
  // By vkgrad's names (A (in, r), B (r, out), f32) for every selected product; empty for a
  // new adapter set (loadHfLora draws its start).
  std::vector<graph::SavedTensor> tensors;
};

// True when DIR/adapter_config.json exists.
bool isHfAdapterFolder(const std::filesystem::path& dir);
// DIR/adapter_config.json alone: the settings and base_model_name_or_path. Throws Error
// "<dir>/adapter_config.json: ..." for a peft_type other than LORA, a bias other than "none",
// use_rslora, use_dora, modules_to_save, a regex (string) target_modules, a rank or alpha
// out of range.
HfLora readHfLoraConfig(const std::filesystem::path& dir);
// The config and the weights, checked against the base model: every selected product's
// lora_A and lora_B present with the shapes the base and r give, nothing else. Throws Error
// naming the file and the tensor (both shapes for a mis-shaped one: an adapter of another
// base), or what readHfLoraConfig and selectLinears throw.
HfLora readHfLora(const std::filesystem::path& dir, const HfModel& base);

// Throws what loadHfLora throws for these settings (selectLinears; a rank outside
// [1, min(in, out)] of a selected product, named), before anything is declared or allocated.
void checkHfLora(const HfModel& model, const HfLora& lora);
// On a store where the model is declared (a planning one too): freezes its weights (16-bit
// storage as loadHfModel's frozen load) and declares an adapter on each selected product,
// trainable when `train`.
void adaptHfLora(graph::ParameterStore& store, const HfModel& model, const HfLora& lora,
                 bool train);
// Declares the model in an empty store with its weights frozen (16-bit ones kept 16-bit, as
// loadHfModel's frozen load), an adapter on each product lora's targets select, and uploads
// the weights with lora.tensors, or with new adapters drawn from `seed`
// (nn::loraInitialValues) where it has none. `train`: the adapters are trainable, else frozen
// too. Throws what selectLinears, nn::declareLora and the store throw.
void loadHfLora(graph::ParameterStore& store, const HfModel& model, const HfLora& lora, bool train,
                uint64_t seed);

// Writes the store's adapters (loadHfLora, then trained) into out in PEFT's layout, each file
// atomically; returns the names written. Throws Error naming a file that cannot be written.
std::vector<std::string> saveHfLora(const std::filesystem::path& out, const HfModel& model,
                                    const HfLora& lora, const graph::ParameterStore& store);

}  // namespace vkgrad::hf
