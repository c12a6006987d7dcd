#include "vkgrad/hf/gpt2.h"

#include <set>

#include "vkgrad/core/error.h"

namespace vkgrad::hf {

using graph::SavedTensor;

namespace {

constexpr const char* kPrefix = "transformer.";

ops::Activation activation(const std::string& name) {
  // gelu_new is GPT-2's own tanh approximation, the formula of GeluTanh.
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast")
    return ops::Activation::GeluTanh;
  if (name == "gelu") return ops::Activation::GeluErf;
  if (name == "relu") return ops::Activation::Relu;
  throw Error("activation_function \"" + name +
              "\" is not supported (gelu_new, gelu_pytorch_tanh, gelu, relu)");
}

// True for the attention's causal-mask buffers, h.<i>.attn.bias and h.<i>.attn.masked_bias.
bool maskBuffer(const std::string& name) {
  if (name.rfind("h.", 0) != 0) return false;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos || dot == 2) return false;
  for (size_t i = 2; i < dot; ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  const std::string rest = name.substr(dot);
  return rest == ".attn.bias" || rest == ".attn.masked_bias";
}

}  // namespace

gpt::GptConfig gpt2Config(const HfConfig& hf) {
  const graph::Json& j = hf.json;
  gpt::GptConfig c;
  try {
    if (hf.type != ModelType::Gpt2)
      throw Error(std::string("model_type is ") + modelTypeName(hf.type) + ", not gpt2");
    c.width = configInt(j, "n_embd", 768, gpt::kMaxWidth);
    c.layers = configInt(j, "n_layer", 12, gpt::kMaxLayers);
    c.heads = configInt(j, "n_head", 12, gpt::kMaxHeads);
    c.context = configInt(j, "n_positions", configInt(j, "n_ctx", 1024, gpt::kMaxContext),
                          gpt::kMaxContext);
    c.vocab = configInt(j, "vocab_size", 50257, gpt::kMaxVocab);
    c.norm = nn::Norm::Pre;
    c.tie_weights = configBool(j, "tie_word_embeddings", true);
    c.activation = {activation(configString(j, "activation_function", "gelu_new"))};
    c.norm_eps = float(configNumber(j, "layer_norm_epsilon", 1e-5));
    c.dropout = 0.0f;  // the config's dropouts are for training; a fine-tuning run sets its own
    const int64_t inner = configInt(j, "n_inner", 4 * c.width, int64_t(1) << 31);
    if (inner != 4 * c.width)
      throw Error("n_inner " + std::to_string(inner) + " is not supported (vkgrad's GPT has 4 * " +
                  "n_embd = " + std::to_string(4 * c.width) + ")");
    if (!configBool(j, "scale_attn_weights", true))
      throw Error("scale_attn_weights false is not supported (attention scales by 1/sqrt(d))");
    if (configBool(j, "scale_attn_by_inverse_layer_idx", false))
      throw Error("scale_attn_by_inverse_layer_idx is not supported");
    if (configBool(j, "add_cross_attention", false))
      throw Error("add_cross_attention is not supported (a decoder alone)");
    c.validate();
  } catch (const Error& e) {
    throw Error(hf.where + ": " + e.what());
  }
  return c;
}

std::vector<Gpt2Tensor> gpt2Tensors(const gpt::GptConfig& c) {
  const int64_t C = c.width;
  std::vector<Gpt2Tensor> out{{"wte.weight", "emb.tok", {c.vocab, C}},
                              {"wpe.weight", "emb.pos", {c.context, C}}};
  auto linear = [&](const std::string& hf, const std::string& vk, int64_t in, int64_t n) {
    out.push_back({hf + ".weight", vk + ".w", {in, n}});
    out.push_back({hf + ".bias", vk + ".b", {n}});
  };
  auto norm = [&](const std::string& hf, const std::string& vk) {
    out.push_back({hf + ".weight", vk + ".g", {C}});
    out.push_back({hf + ".bias", vk + ".b", {C}});
  };
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string h = "h." + std::to_string(i), v = nn::blockName(i);
    norm(h + ".ln_1", v + ".ln1");
    linear(h + ".attn.c_attn", v + ".attn.qkv", C, 3 * C);
    linear(h + ".attn.c_proj", v + ".attn.proj", C, C);
    norm(h + ".ln_2", v + ".ln2");
    linear(h + ".mlp.c_fc", v + ".mlp.fc", C, 4 * C);
    linear(h + ".mlp.c_proj", v + ".mlp.proj", 4 * C, C);
  }
  norm("ln_f", "ln_f");
  if (!c.tie_weights) out.push_back({"lm_head.weight", "head.w", {c.vocab, C}, true});
  return out;
}

std::vector<SavedTensor> gpt2Parameters(gpt::GptConfig& config, HfWeights weights,
                                        const std::string& where) {
  // The names without the prefix; a name given both ways is ambiguous.
  std::map<std::string, SavedTensor> named;
  for (auto& [name, t] : weights.tensors) {
    const bool prefixed = name.rfind(kPrefix, 0) == 0;
    const std::string bare = prefixed ? name.substr(std::string(kPrefix).size()) : name;
    if (maskBuffer(bare)) continue;
    if (!named.emplace(bare, std::move(t)).second)
      throw Error(where + ": tensor \"" + bare + "\" is given both with and without the \"" +
                  kPrefix + "\" prefix");
  }
  if (!named.count("lm_head.weight")) config.tie_weights = true;
  std::set<std::string> used;
  std::vector<SavedTensor> out;
  for (const Gpt2Tensor& want : gpt2Tensors(config)) {
    const auto it = named.find(want.hf);
    if (it == named.end())
      throw Error(where + ": tensor \"" + want.hf + "\" " + graph::dimsText(want.shape) +
                  " is missing");
    SavedTensor& t = it->second;
    if (t.shape != want.shape)
      throw Error(where + ": tensor \"" + want.hf + "\" is " + graph::dimsText(t.shape) +
                  " in the file but " + graph::dimsText(want.shape) + " by config.json");
    if (t.dtype == ops::DType::U32)
      throw Error(where + ": tensor \"" + want.hf + "\" holds integers, not a float format");
    used.insert(want.hf);
    if (want.transposed) {
      out.push_back(transposedSaved(t, want.vkgrad));
    } else {
      t.name = want.vkgrad;
      out.push_back(std::move(t));
    }
  }
  // A tied head's lm_head.weight is wte.weight again (save_pretrained may write it).
  if (config.tie_weights) used.insert("lm_head.weight");
  for (const auto& [name, t] : named)
    if (!used.count(name))
      throw Error(where + ": tensor \"" + name + "\" " + graph::dimsText(t.shape) +
                  " is not part of a GPT-2 of this config");
  return out;
}

std::vector<SavedTensor> gpt2Weights(const gpt::GptConfig& config,
                                     const std::vector<SavedTensor>& parameters) {
  std::map<std::string, const SavedTensor*> by_name;
  for (const SavedTensor& t : parameters) by_name[t.name] = &t;
  std::vector<SavedTensor> out;
  for (const Gpt2Tensor& want : gpt2Tensors(config)) {
    const auto it = by_name.find(want.vkgrad);
    std::vector<int64_t> shape = want.shape;
    if (want.transposed) std::swap(shape[0], shape[1]);
    if (it == by_name.end() || it->second->shape != shape)
      throw Error(
          "gpt2Weights: parameter \"" + want.vkgrad + "\" " + graph::dimsText(shape) +
          (it == by_name.end() ? " is missing" : " is " + graph::dimsText(it->second->shape)));
    const std::string name = want.transposed ? want.hf : kPrefix + want.hf;
    if (want.transposed) {
      out.push_back(convertSaved(transposedSaved(*it->second, name), ops::DType::F32));
    } else {
      out.push_back(convertSaved(*it->second, ops::DType::F32));
      out.back().name = name;
    }
  }
  return out;
}

}  // namespace vkgrad::hf
