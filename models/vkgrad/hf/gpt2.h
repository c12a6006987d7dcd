// GPT-2 from a Hugging Face folder onto vkgrad's GPT (gpt/gpt.h), which is the same
// architecture: learned positions, pre-norm blocks, a fused qkv projection with bias, an MLP
// of 4 * width, a final LayerNorm and a head tied to the token table. GPT-2's Conv1D weights
// are stored (in, out) as vkgrad's Linear is, so they load as they are; only an untied
// lm_head.weight, an nn.Linear (vocab, width), is transposed.
//
// config.json: n_embd, n_layer, n_head, n_positions (or the older n_ctx), vocab_size,
// layer_norm_epsilon, activation_function (gelu_new, gelu_pytorch_tanh: GELU-tanh; gelu:
// GELU-erf; relu), tie_word_embeddings; an absent key takes Hugging Face's default. Settings
// vkgrad's GPT does not have are refused by name: n_inner other than 4 * n_embd,
// scale_attn_weights false, scale_attn_by_inverse_layer_idx, add_cross_attention.
//
// Tensors (each with or without the "transformer." prefix): wte.weight (vocab, C),
// wpe.weight (n_positions, C), h.<i>.{ln_1, ln_2}.{weight, bias} (C),
// h.<i>.attn.c_attn.{weight (C, 3C), bias (3C)}, h.<i>.attn.c_proj.{weight (C, C), bias},
// h.<i>.mlp.c_fc.{weight (C, 4C), bias}, h.<i>.mlp.c_proj.{weight (4C, C), bias},
// ln_f.{weight, bias}, and lm_head.weight (vocab, C). The head is tied when
// tie_word_embeddings is true (lm_head.weight, where present, is the same tensor and is not
// read) or when lm_head.weight is absent. The causal-mask buffers h.<i>.attn.bias and
// h.<i>.attn.masked_bias are not weights and are skipped; any other name is refused.
#pragma once

#include <string>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/hf/config.h"
#include "vkgrad/hf/weights.h"

namespace vkgrad::hf {

// One GPT-2 weight: its name in the folder (without the prefix), its vkgrad parameter and
// the shape the folder stores it in (transposed: the parameter is its transpose).
struct Gpt2Tensor {
  std::string hf, vkgrad;
  std::vector<int64_t> shape;
  bool transposed = false;
};

// The GptConfig of a gpt2 config.json, tie_weights as the config says (loadGpt2 unties nothing
// but may tie: see above). Throws Error "<config.json>: <key> ..." for a value out of range,
// an unsupported activation or setting (named), or a GptConfig vkgrad refuses.
gpt::GptConfig gpt2Config(const HfConfig& config);

// Every weight a GPT-2 of `config` has in the folder, in the order declareGpt declares them.
std::vector<Gpt2Tensor> gpt2Tensors(const gpt::GptConfig& config);

// The weights as declareGpt(store, config) names and shapes them, ready for
// ParameterStore::upload, each in the file's float format (an untied head in F32). config's
// tie_weights becomes true when the folder has no lm_head.weight. Throws Error "<where>: ..."
// naming a missing tensor, one whose shape differs from the config's (both shapes given), one
// vkgrad does not know, one given both with and without the prefix, or one that is not a
// float tensor.
std::vector<graph::SavedTensor> gpt2Parameters(gpt::GptConfig& config, HfWeights weights,
                                               const std::string& where);

// The inverse of gpt2Parameters, for saving a fine-tuned model in the folder's layout: the
// parameters as declareGpt names them (ParameterStore::download) under GPT-2's names as
// save_pretrained writes them ("transformer." prefix; lm_head.weight only when untied,
// transposed back), each in f32. Throws Error naming a parameter that is missing or
// mis-shaped.
std::vector<graph::SavedTensor> gpt2Weights(const gpt::GptConfig& config,
                                            const std::vector<graph::SavedTensor>& parameters);

}  // namespace vkgrad::hf
