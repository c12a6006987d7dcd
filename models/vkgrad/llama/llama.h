// The Llama family on the graph (Hugging Face's LlamaForCausalLM and Qwen2ForCausalLM): a token
// table, `layers` pre-norm blocks, a final RMSNorm and a linear head to the vocabulary,
// optionally tied to the token table. Each block:
//
//   h = rmsNorm(x)·Wqkv (+ b)             one product for q, k and v: (B,T,(H+2*Hkv)*D)
//   q, k = rope(q, k)                     rotate_half form, theta = rope_theta, in place
//   x = x + attention(q, k, v)·Wo         causal, Hkv key/value heads shared by H/Hkv queries
//   x = x + swiglu(rmsNorm(x)·Wgu)·Wd     Wgu: gate and up side by side, one product
//
// A model is a gpt::GptConfig with `llama` set: declareGpt, gptCache and gptLogits call the
// functions here, so the sampler, the stream loss and the trainer run it as they run a GPT.
// Every product goes through nn::linear (weights (in, out), the bias where the store has one).
// GptConfig::dropout, for fine-tuning, acts on the attention and MLP outputs before they join
// the residual stream (Hugging Face's Llama has only attention_dropout, on the attention
// weights, which the flash kernels do not form).
//
// Parameter names: emb.tok (vocab,C); per block h<i>: ln1.g (C), attn.qkv.w (C,(H+2Hkv)D) and
// attn.qkv.b with qkv_bias, attn.proj.w (C,C) and attn.proj.b with proj_bias, ln2.g (C),
// mlp.gate_up.w (C,2I), mlp.proj.w (I,C); ln_f.g (C); head.w (C,vocab) unless tied.
#pragma once

#include "vkgrad/gpt/gpt.h"

namespace vkgrad::llama {

// Throws Error "GptConfig: ..." when config.llama's settings do not fit the rest: kv_heads not
// dividing heads, an odd head dimension (rotary pairs), an intermediate size out of range.
// (GptConfig::validate calls this; the shared bounds are its own.)
void validateLlama(const gpt::GptConfig& config);

// Adds every parameter: products and the token table N(0, 0.02) (Hugging Face's
// initializer_range), RMSNorm gains 1, biases 0. Validates config first.
void declareLlama(graph::ParameterStore& store, const gpt::GptConfig& config);

// gptLogits for a Llama: ids (B,T) u32, T <= context -> logits (B*T, vocab); with a cache
// (gptCache: (B,context,Hkv*D) keys and values per layer), ids is (B,1) at cache->position.
// Throws ShapeError for a window longer than the context.
graph::Tensor llamaLogits(graph::Graph& g, const graph::ParameterStore& store,
                          const gpt::GptConfig& config, graph::Tensor ids,
                          const gpt::GptCache* cache = nullptr);

}  // namespace vkgrad::llama
