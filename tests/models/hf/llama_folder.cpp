#include "models/hf/llama_folder.h"

#include <cmath>
#include <cstring>
#include <fstream>

#include "common/random.h"
#include "models/hf/gpt2_folder.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::test {

namespace fs = std::filesystem;

namespace {

int64_t headDim(const gpt::GptConfig& c) {
  return c.width / c.heads;
}

// The folder's name of layer i's tensor `part`.
std::string layer(int64_t i, const std::string& part) {
  return "model.layers." + std::to_string(i) + "." + part;
}

using Vec = std::vector<double>;

// y = W x (+ b), W (out, in) row-major as nn.Linear stores it.
Vec apply(const HfArrays& w, const std::string& name, const Vec& x) {
  const HfArray& m = w.at(name + ".weight");
  const size_t out = size_t(m.shape[0]), in = size_t(m.shape[1]);
  const auto bias = w.find(name + ".bias");
  Vec y(out);
  for (size_t o = 0; o < out; ++o) {
    double sum = bias == w.end() ? 0.0 : double(bias->second.values[o]);
    for (size_t k = 0; k < in; ++k) sum += double(m.values[o * in + k]) * x[k];
    y[o] = sum;
  }
  return y;
}

Vec rmsNorm(const Vec& x, const HfArray& gain, double eps) {
  double mean = 0;
  for (double v : x) mean += v * v;
  const double scale = 1.0 / std::sqrt(mean / double(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * double(gain.values[i]);
  return y;
}

// Hugging Face's rotate_half rotation of each head of x (heads * D) at position pos.
void rotate(Vec& x, int64_t D, int64_t pos, double theta) {
  const size_t half = size_t(D / 2);
  for (size_t h = 0; h < x.size() / size_t(D); ++h) {
    double* v = &x[h * size_t(D)];
    for (size_t i = 0; i < half; ++i) {
      const double angle = double(pos) * std::pow(theta, -2.0 * double(i) / double(D));
      const double a = v[i], b = v[i + half];
      v[i] = a * std::cos(angle) - b * std::sin(angle);
      v[i + half] = b * std::cos(angle) + a * std::sin(angle);
    }
  }
}

}  // namespace

graph::Json llamaConfigJson(const gpt::GptConfig& c, bool qwen2) {
  const gpt::LlamaSpec& l = *c.llama;
  graph::Json j{{"architectures", {qwen2 ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                {"model_type", qwen2 ? "qwen2" : "llama"},
                {"hidden_act", "silu"},
                {"hidden_size", c.width},
                {"intermediate_size", l.intermediate},
                {"num_hidden_layers", c.layers},
                {"num_attention_heads", c.heads},
                {"num_key_value_heads", l.kv_heads},
                {"max_position_embeddings", c.context},
                {"vocab_size", c.vocab},
                {"rms_norm_eps", c.norm_eps},
                {"rope_theta", l.rope_theta},
                {"rope_scaling", nullptr},
                {"tie_word_embeddings", c.tie_weights},
                {"torch_dtype", "float32"}};
  if (qwen2) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = 4096;
  } else {
    j["attention_bias"] = l.qkv_bias;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
    j["head_dim"] = headDim(c);
  }
  return j;
}

HfArrays randomLlamaWeights(const gpt::GptConfig& c, Rng& rng) {
  const gpt::LlamaSpec& l = *c.llama;
  const int64_t C = c.width, Q = c.heads * headDim(c), KV = l.kv_heads * headDim(c);
  const int64_t I = l.intermediate;
  HfArrays w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float mean = 0.0f) {
    size_t n = 1;
    for (int64_t d : shape) n *= size_t(d);
    w[name] = {std::move(shape), rng.normal(n, mean, 0.3f)};
  };
  add("model.embed_tokens.weight", {c.vocab, C});
  for (int64_t i = 0; i < c.layers; ++i) {
    add(layer(i, "input_layernorm.weight"), {C}, 1.0f);
    for (const char* p : {"q", "k", "v"}) {
      const int64_t rows = std::string(p) == "q" ? Q : KV;
      add(layer(i, std::string("self_attn.") + p + "_proj.weight"), {rows, C});
      if (l.qkv_bias) add(layer(i, std::string("self_attn.") + p + "_proj.bias"), {rows});
    }
    add(layer(i, "self_attn.o_proj.weight"), {C, Q});
    if (l.proj_bias) add(layer(i, "self_attn.o_proj.bias"), {C});
    add(layer(i, "post_attention_layernorm.weight"), {C}, 1.0f);
    add(layer(i, "mlp.gate_proj.weight"), {I, C});
    add(layer(i, "mlp.up_proj.weight"), {I, C});
    add(layer(i, "mlp.down_proj.weight"), {C, I});
  }
  add("model.norm.weight", {C}, 1.0f);
  if (!c.tie_weights) add("lm_head.weight", {c.vocab, C});
  return w;
}

void writeLlamaFolder(const fs::path& dir, const gpt::GptConfig& c, const HfArrays& weights,
                      const LlamaFolderOptions& o) {
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << graph::dumpJson(llamaConfigJson(c, o.qwen2), 2);
  std::vector<graph::SavedTensor> tensors;
  for (const auto& [name, a] : weights) {
    graph::SavedTensor t{name, ops::DType::F32, a.shape, std::vector<uint32_t>(a.values.size())};
    std::memcpy(t.data.data(), a.values.data(), a.values.size() * 4);
    tensors.push_back(o.dtype == ops::DType::F32 ? t : graph::convertSaved(t, o.dtype));
  }
  if (o.inv_freq)
    for (int64_t i = 0; i < c.layers; ++i)
      tensors.push_back({layer(i, "self_attn.rotary_emb.inv_freq"),
                         ops::DType::F32,
                         {headDim(c) / 2},
                         std::vector<uint32_t>(size_t(headDim(c) / 2), 0x3f800000u)});
  graph::saveSafetensors(dir / "model.safetensors", {tensors, {{"format", "pt"}}});
  writeSmallTokenizer(dir);
}

std::vector<float> llamaReferenceLogits(const gpt::GptConfig& c, const HfArrays& w,
                                        std::span<const uint32_t> ids) {
  const gpt::LlamaSpec& l = *c.llama;
  const int64_t D = headDim(c), group = c.heads / l.kv_heads;
  const size_t T = ids.size(), C = size_t(c.width);
  const HfArray& embed = w.at("model.embed_tokens.weight");
  std::vector<Vec> x(T, Vec(C));
  for (size_t t = 0; t < T; ++t)
    for (size_t i = 0; i < C; ++i) x[t][i] = embed.values[size_t(ids[t]) * C + i];
  for (int64_t i = 0; i < c.layers; ++i) {
    std::vector<Vec> q(T), k(T), v(T);
    for (size_t t = 0; t < T; ++t) {
      const Vec h = rmsNorm(x[t], w.at(layer(i, "input_layernorm.weight")), c.norm_eps);
      q[t] = apply(w, layer(i, "self_attn.q_proj"), h);
      k[t] = apply(w, layer(i, "self_attn.k_proj"), h);
      v[t] = apply(w, layer(i, "self_attn.v_proj"), h);
      rotate(q[t], D, int64_t(t), l.rope_theta);
      rotate(k[t], D, int64_t(t), l.rope_theta);
    }
    for (size_t t = 0; t < T; ++t) {
      Vec o(size_t(c.heads * D), 0.0);
      for (int64_t h = 0; h < c.heads; ++h) {
        const size_t qo = size_t(h * D), ko = size_t(h / group * D);
        Vec score(t + 1);
        double top = -INFINITY, sum = 0;
        for (size_t j = 0; j <= t; ++j) {
          double dot = 0;
          for (size_t d = 0; d < size_t(D); ++d) dot += q[t][qo + d] * k[j][ko + d];
          score[j] = dot / std::sqrt(double(D));
          top = std::max(top, score[j]);
        }
        for (double& s : score) sum += (s = std::exp(s - top));
        for (size_t j = 0; j <= t; ++j)
          for (size_t d = 0; d < size_t(D); ++d) o[qo + d] += score[j] / sum * v[j][ko + d];
      }
      const Vec attn = apply(w, layer(i, "self_attn.o_proj"), o);
      for (size_t e = 0; e < C; ++e) x[t][e] += attn[e];
      const Vec h = rmsNorm(x[t], w.at(layer(i, "post_attention_layernorm.weight")), c.norm_eps);
      const Vec gate = apply(w, layer(i, "mlp.gate_proj"), h),
                up = apply(w, layer(i, "mlp.up_proj"), h);
      Vec a(gate.size());
      for (size_t e = 0; e < a.size(); ++e) a[e] = gate[e] / (1.0 + std::exp(-gate[e])) * up[e];
      const Vec down = apply(w, layer(i, "mlp.down_proj"), a);
      for (size_t e = 0; e < C; ++e) x[t][e] += down[e];
    }
  }
  const std::string head = c.tie_weights ? "model.embed_tokens" : "lm_head";
  std::vector<float> logits;
  for (size_t t = 0; t < T; ++t) {
    const Vec y = apply(w, head, rmsNorm(x[t], w.at("model.norm.weight"), c.norm_eps));
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

}  // namespace vkgrad::test
