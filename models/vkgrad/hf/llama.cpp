#include "vkgrad/hf/llama.h"

#include <cstring>
#include <set>

#include "vkgrad/core/error.h"
#include "vkgrad/nn/transformer.h"

namespace vkgrad::hf {

using graph::SavedTensor;

namespace {

constexpr const char* kInvFreq = ".self_attn.rotary_emb.inv_freq";

// True for model.layers.<i>.self_attn.rotary_emb.inv_freq: a buffer of rope_theta's
// frequencies that older transformers versions saved, not a weight.
bool frequencyBuffer(const std::string& name) {
  const std::string prefix = "model.layers.", suffix = kInvFreq;
  return name.size() > prefix.size() + suffix.size() && name.rfind(prefix, 0) == 0 &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The settings Hugging Face's Llama and Qwen2 have and vkgrad's Llama does not.
void refuseUnsupported(const graph::Json& j) {
  if (const std::string act = configString(j, "hidden_act", "silu"); act != "silu")
    throw Error("hidden_act \"" + act + "\" is not supported (silu: the SwiGLU MLP)");
  if (const auto it = j.find("rope_scaling"); it != j.end() && !it->is_null())
    throw Error("rope_scaling " + graph::dumpJson(*it) +
                " is not supported (plain rotary positions only: rope_scaling null)");
  if (configBool(j, "use_sliding_window", false))
    throw Error("use_sliding_window true is not supported (attention over the whole context)");
  if (configBool(j, "mlp_bias", false)) throw Error("mlp_bias true is not supported");
  // Some exports (SmolLM2's) say which rotary form they use: vkgrad's is rotate_half's halves.
  if (configBool(j, "rope_interleaved", false))
    throw Error("rope_interleaved true is not supported (rotate_half's pairs (i, i + D/2))");
  if (const int64_t tp = configInt(j, "pretraining_tp", 1); tp > 1)
    throw Error("pretraining_tp " + std::to_string(tp) + " is not supported (1)");
}

// The parts' f32 values one after another, then transposed for a Linear; in the parts' common
// format when they share one (exact: each value came from it).
SavedTensor joined(const LlamaTensor& want, const std::vector<const SavedTensor*>& parts) {
  if (parts.size() == 1 && !want.linear) {
    SavedTensor t = *parts[0];
    t.name = want.vkgrad;
    return t;
  }
  ops::DType dtype = parts[0]->dtype;
  SavedTensor t{want.vkgrad, ops::DType::F32, parts[0]->shape, {}};
  t.shape[0] = 0;  // the other dimensions agree (llamaTensors)
  for (const SavedTensor* p : parts) {
    if (p->dtype != dtype) dtype = ops::DType::F32;
    const SavedTensor f = graph::convertSaved(*p, ops::DType::F32);
    t.data.insert(t.data.end(), f.data.begin(), f.data.end());
    t.shape[0] += p->shape[0];
  }
  if (want.linear) t = transposedSaved(t, want.vkgrad);
  return dtype == ops::DType::F32 ? t : graph::convertSaved(t, dtype);
}

}  // namespace

gpt::GptConfig llamaConfig(const HfConfig& hf) {
  const graph::Json& j = hf.json;
  const bool qwen = hf.type == ModelType::Qwen2;
  gpt::GptConfig c;
  gpt::LlamaSpec& l = c.llama.emplace();
  try {
    if (hf.type != ModelType::Llama && !qwen)
      throw Error(std::string("model_type is ") + modelTypeName(hf.type) + ", not llama or qwen2");
    refuseUnsupported(j);
    c.width = configInt(j, "hidden_size", 4096, gpt::kMaxWidth);
    l.intermediate = configInt(j, "intermediate_size", qwen ? 22016 : 11008, gpt::kMaxWidth * 8);
    c.layers = configInt(j, "num_hidden_layers", 32, gpt::kMaxLayers);
    c.heads = configInt(j, "num_attention_heads", 32, gpt::kMaxHeads);
    l.kv_heads = configInt(j, "num_key_value_heads", c.heads, gpt::kMaxHeads);
    c.context = configInt(j, "max_position_embeddings", qwen ? 32768 : 2048, gpt::kMaxContext);
    c.vocab = configInt(j, "vocab_size", qwen ? 151936 : 32000, gpt::kMaxVocab);
    c.tie_weights = configBool(j, "tie_word_embeddings", false);
    c.norm_eps = float(configNumber(j, "rms_norm_eps", 1e-6));
    l.rope_theta = float(configNumber(j, "rope_theta", 10000.0));
    const bool bias = !qwen && configBool(j, "attention_bias", false);
    l.qkv_bias = qwen || bias;
    l.proj_bias = bias;
    c.dropout = 0.0f;  // attention_dropout is for training; a fine-tuning run sets its own
    c.validate();
    const int64_t head_dim = configInt(j, "head_dim", c.width / c.heads);
    if (head_dim != c.width / c.heads)
      throw Error("head_dim " + std::to_string(head_dim) +
                  " is not supported (vkgrad's Llama has hidden_size / num_attention_heads = " +
                  std::to_string(c.width / c.heads) + ")");
  } catch (const Error& e) {
    throw Error(hf.where + ": " + e.what());
  }
  return c;
}

std::vector<LlamaTensor> llamaTensors(const gpt::GptConfig& c) {
  const gpt::LlamaSpec& l = *c.llama;
  const int64_t C = c.width, D = C / c.heads, Q = c.heads * D, KV = l.kv_heads * D;
  const int64_t I = l.intermediate;
  std::vector<LlamaTensor> out{{"emb.tok", {"model.embed_tokens.weight"}, {{c.vocab, C}}}};
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string h = "model.layers." + std::to_string(i) + ".", v = nn::blockName(i);
    const std::string a = h + "self_attn.";
    out.push_back({v + ".ln1.g", {h + "input_layernorm.weight"}, {{C}}});
    out.push_back({v + ".attn.qkv.w",
                   {a + "q_proj.weight", a + "k_proj.weight", a + "v_proj.weight"},
                   {{Q, C}, {KV, C}, {KV, C}},
                   true});
    if (l.qkv_bias)
      out.push_back({v + ".attn.qkv.b",
                     {a + "q_proj.bias", a + "k_proj.bias", a + "v_proj.bias"},
                     {{Q}, {KV}, {KV}}});
    out.push_back({v + ".attn.proj.w", {a + "o_proj.weight"}, {{C, Q}}, true});
    if (l.proj_bias) out.push_back({v + ".attn.proj.b", {a + "o_proj.bias"}, {{C}}});
    out.push_back({v + ".ln2.g", {h + "post_attention_layernorm.weight"}, {{C}}});
    out.push_back({v + ".mlp.gate_up.w",
                   {h + "mlp.gate_proj.weight", h + "mlp.up_proj.weight"},
                   {{I, C}, {I, C}},
                   true});
    out.push_back({v + ".mlp.proj.w", {h + "mlp.down_proj.weight"}, {{C, I}}, true});
  }
  out.push_back({"ln_f.g", {"model.norm.weight"}, {{C}}});
  if (!c.tie_weights) out.push_back({"head.w", {"lm_head.weight"}, {{c.vocab, C}}, true});
  return out;
}

std::vector<SavedTensor> llamaParameters(gpt::GptConfig& config, HfWeights weights,
                                         const std::string& where) {
  std::map<std::string, SavedTensor>& named = weights.tensors;
  if (!named.count("lm_head.weight")) config.tie_weights = true;
  std::set<std::string> used;
  std::vector<SavedTensor> out;
  for (const LlamaTensor& want : llamaTensors(config)) {
    std::vector<const SavedTensor*> parts;
    for (size_t k = 0; k < want.hf.size(); ++k) {
      const std::string& name = want.hf[k];
      const auto it = named.find(name);
      if (it == named.end())
        throw Error(where + ": tensor \"" + name + "\" " + graph::dimsText(want.shapes[k]) +
                    " is missing");
      if (it->second.shape != want.shapes[k])
        throw Error(where + ": tensor \"" + name + "\" is " + graph::dimsText(it->second.shape) +
                    " in the file but " + graph::dimsText(want.shapes[k]) + " by config.json");
      if (it->second.dtype == ops::DType::U32)
        throw Error(where + ": tensor \"" + name + "\" holds integers, not a float format");
      used.insert(name);
      parts.push_back(&it->second);
    }
    out.push_back(joined(want, parts));
  }
  // A tied head's lm_head.weight is embed_tokens again (save_pretrained may write it).
  if (config.tie_weights) used.insert("lm_head.weight");
  for (const auto& [name, t] : named)
    if (!used.count(name) && !frequencyBuffer(name))
      throw Error(where + ": tensor \"" + name + "\" " + graph::dimsText(t.shape) +
                  " is not part of a " + (config.llama->qkv_bias ? "Llama/Qwen2" : "Llama") +
                  " of this config");
  return out;
}

std::vector<SavedTensor> llamaWeights(const gpt::GptConfig& config,
                                      const std::vector<SavedTensor>& parameters) {
  std::map<std::string, const SavedTensor*> by_name;
  for (const SavedTensor& t : parameters) by_name[t.name] = &t;
  std::vector<SavedTensor> out;
  for (const LlamaTensor& want : llamaTensors(config)) {
    // vkgrad's shape: the parts joined along their first dimension, transposed for a Linear.
    std::vector<int64_t> shape = want.shapes[0];
    for (size_t k = 1; k < want.shapes.size(); ++k) shape[0] += want.shapes[k][0];
    if (want.linear) std::swap(shape[0], shape[1]);
    const auto it = by_name.find(want.vkgrad);
    if (it == by_name.end() || it->second->shape != shape)
      throw Error(
          "llamaWeights: parameter \"" + want.vkgrad + "\" " + graph::dimsText(shape) +
          (it == by_name.end() ? " is missing" : " is " + graph::dimsText(it->second->shape)));
    const SavedTensor whole = graph::convertSaved(
        want.linear ? transposedSaved(*it->second, want.vkgrad) : *it->second, ops::DType::F32);
    size_t offset = 0;
    for (size_t k = 0; k < want.hf.size(); ++k) {
      size_t words = 1;
      for (int64_t d : want.shapes[k]) words *= size_t(d);
      out.push_back({want.hf[k], ops::DType::F32, want.shapes[k],
                     std::vector<uint32_t>(whole.data.begin() + ptrdiff_t(offset),
                                           whole.data.begin() + ptrdiff_t(offset + words))});
      offset += words;
    }
  }
  return out;
}

}  // namespace vkgrad::hf
