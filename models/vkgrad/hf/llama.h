// Llama-family models (model_type "llama" and "qwen2") from a Hugging Face folder onto vkgrad's
// Llama (llama/llama.h). The folder's nn.Linear weights are (out, in); vkgrad's products are
// (in, out) and fuse q, k and v into one (C, (H+2Hkv)D) weight and gate and up into one
// (C, 2I), so those tensors are stacked along their rows and transposed on loading, and split
// back on saving.
//
// config.json: hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
// num_key_value_heads (absent: the heads), head_dim (where present, hidden_size /
// num_attention_heads), rms_norm_eps, rope_theta, max_position_embeddings (the context),
// vocab_size, tie_word_embeddings, hidden_act (silu), attention_bias (llama: biases on q, k, v
// and o; qwen2 always has q, k, v biases and none on o); an absent key takes Hugging Face's
// default for the model type. Refused by name: rope_scaling other than null,
// use_sliding_window true, mlp_bias true, rope_interleaved true, pretraining_tp above 1,
// another hidden_act.
//
// Tensors: model.embed_tokens.weight (vocab, C); per layer model.layers.<i>.:
// input_layernorm.weight (C), self_attn.{q,k,v}_proj.weight ((H or Hkv)*D, C) and their
// .bias (Qwen2, attention_bias), self_attn.o_proj.weight (C, C) (.bias with attention_bias),
// post_attention_layernorm.weight (C), mlp.{gate,up}_proj.weight (I, C), mlp.down_proj.weight
// (C, I); model.norm.weight (C); lm_head.weight (vocab, C), absent or ignored when tied. The
// rotary-frequency buffers older files carry (self_attn.rotary_emb.inv_freq) are derived from
// rope_theta and skipped; any other name is refused.
#pragma once

#include <string>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/hf/config.h"
#include "vkgrad/hf/weights.h"

namespace vkgrad::hf {

// One vkgrad parameter of a Llama and the folder's tensors it is made of, joined in order
// along their first dimension.
struct LlamaTensor {
  std::string vkgrad;
  std::vector<std::string> hf;
  std::vector<std::vector<int64_t>> shapes;  // each hf tensor's shape in the folder
  bool linear = false;  // nn.Linear weights: the joined (out, in) is transposed to (in, out)
};

// The GptConfig (with llama set) of a llama or qwen2 config.json. Throws Error
// "<config.json>: <key> ..." for a value out of range, an unsupported setting (named), or a
// config vkgrad refuses.
gpt::GptConfig llamaConfig(const HfConfig& config);

// Every parameter of a Llama of `config`, in the order declareLlama declares them.
std::vector<LlamaTensor> llamaTensors(const gpt::GptConfig& config);

// The weights as declareLlama names and shapes them, for ParameterStore::upload, each in the
// file's float format where its tensors share one (a joined or transposed one converted back
// to it, exactly), else F32. config's tie_weights becomes true when the folder has no
// lm_head.weight. Throws Error "<where>: ..." naming a missing tensor, a mis-shaped one (both
// shapes given), one vkgrad does not know, or one that is not a float tensor.
std::vector<graph::SavedTensor> llamaParameters(gpt::GptConfig& config, HfWeights weights,
                                                const std::string& where);

// The inverse, for saving: the parameters by vkgrad's names (ParameterStore::download) under
// the folder's names as save_pretrained writes them, split and transposed back, each in f32.
// Throws Error naming a parameter that is missing or mis-shaped.
std::vector<graph::SavedTensor> llamaWeights(const gpt::GptConfig& config,
                                             const std::vector<graph::SavedTensor>& parameters);

}  // namespace vkgrad::hf
