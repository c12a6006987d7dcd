#include "models/hf/gpt2_folder.h"

#include <fstream>

#include "common/random.h"
#include "models/tokenizers/small_bpe.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/tokenizers/bpe_trainer.h"
#include "vkgrad/tokenizers/tokenizer_writer.h"

namespace vkgrad::test {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMerges = 40;

const tokenizers::TrainedBpe& trained() {
  static const tokenizers::TrainedBpe bpe = tokenizers::trainBpe(licenceText(6000), kMerges);
  return bpe;
}

void writeText(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// GPT-2's name of a vkgrad parameter, without the prefix.
std::string hfName(const std::string& name) {
  if (name == "emb.tok") return "wte.weight";
  if (name == "emb.pos") return "wpe.weight";
  if (name == "head.w") return "lm_head.weight";
  if (name == "ln_f.g") return "ln_f.weight";
  if (name == "ln_f.b") return "ln_f.bias";
  // h<i>.<part>.<w|g|b>
  const size_t dot = name.find('.'), last = name.rfind('.');
  const std::string block = "h." + name.substr(1, dot - 1);
  const std::string part = name.substr(dot + 1, last - dot - 1), leaf = name.substr(last + 1);
  const std::string hf_part = part == "ln1"         ? "ln_1"
                              : part == "ln2"       ? "ln_2"
                              : part == "attn.qkv"  ? "attn.c_attn"
                              : part == "attn.proj" ? "attn.c_proj"
                              : part == "mlp.fc"    ? "mlp.c_fc"
                                                    : "mlp.c_proj";
  return block + "." + hf_part + "." + (leaf == "b" ? "bias" : "weight");
}

graph::SavedTensor tensor(const std::string& name, std::vector<int64_t> shape,
                          const std::vector<float>& values, ops::DType dtype) {
  graph::SavedTensor t{name, ops::DType::F32, std::move(shape), {}};
  t.data.resize(values.size());
  std::memcpy(t.data.data(), values.data(), values.size() * 4);
  return dtype == ops::DType::F32 ? t : graph::convertSaved(t, dtype);
}

}  // namespace

uint32_t smallTokenizerSize() {
  return uint32_t(trained().tokens.size()) + 1;
}

graph::Json gpt2ConfigJson(const gpt::GptConfig& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", "gelu_new"},
          {"n_embd", c.width},
          {"n_layer", c.layers},
          {"n_head", c.heads},
          {"n_positions", c.context},
          {"n_ctx", c.context},
          {"n_inner", nullptr},
          {"vocab_size", c.vocab},
          {"layer_norm_epsilon", 1e-5},
          {"tie_word_embeddings", c.tie_weights},
          {"torch_dtype", "float32"}};
}

void writeGpt2Folder(const fs::path& dir, const gpt::GptConfig& c, const NamedArrays& params,
                     const Gpt2FolderOptions& o) {
  fs::create_directories(dir);
  writeText(dir / "config.json", graph::dumpJson(gpt2ConfigJson(c), 2));
  const std::string prefix = o.prefix ? "transformer." : "";
  const std::map<std::string, ops::Shape> shapes = gptReferenceShapes(c);
  std::vector<graph::SavedTensor> tensors;
  for (const auto& [name, shape] : shapes) {
    const std::vector<float>& v = params.at(name);
    if (name == "head.w") {  // (C, V) -> an nn.Linear's (V, C)
      const size_t C = size_t(shape[0]), V = size_t(shape[1]);
      std::vector<float> t(v.size());
      for (size_t i = 0; i < C; ++i)
        for (size_t j = 0; j < V; ++j) t[j * C + i] = v[i * V + j];
      tensors.push_back(tensor("lm_head.weight", {shape[1], shape[0]}, t, o.dtype));
      continue;
    }
    tensors.push_back(tensor(prefix + hfName(name), graph::savedDims(shape), v, o.dtype));
  }
  if (c.tie_weights && o.tied_lm_head)
    tensors.push_back(tensor("lm_head.weight", {c.vocab, c.width}, params.at("emb.tok"), o.dtype));
  if (o.mask_buffers)
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string h = prefix + "h." + std::to_string(i) + ".attn.";
      const size_t n = size_t(c.context * c.context);
      tensors.push_back(
          tensor(h + "bias", {1, 1, c.context, c.context}, std::vector<float>(n, 1.0f), o.dtype));
      tensors.push_back(tensor(h + "masked_bias", {}, {-1e4f}, o.dtype));
    }
  if (o.shards <= 1) {
    graph::saveSafetensors(dir / "model.safetensors", {tensors, {{"format", "pt"}}});
  } else {
    graph::Json map = graph::Json::object();
    for (int s = 0; s < o.shards; ++s) {
      char file[64];
      std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, o.shards);
      graph::Checkpoint shard;
      for (size_t i = size_t(s); i < tensors.size(); i += size_t(o.shards)) {
        shard.tensors.push_back(tensors[i]);
        map[tensors[i].name] = file;
      }
      graph::saveSafetensors(dir / file, shard);
    }
    writeText(dir / "model.safetensors.index.json",
              graph::dumpJson({{"metadata", {{"total_size", 0}}}, {"weight_map", map}}, 2));
  }
  writeSmallTokenizer(dir, o.tokenizer_json);
}

void writeSmallTokenizer(const fs::path& dir, bool tokenizer_json) {
  const tokenizers::BpeSpec spec = trained().spec();
  const std::vector<tokenizers::AddedToken> added{
      {"<|endoftext|>", uint32_t(trained().tokens.size()), true}};
  if (tokenizer_json) {
    writeText(dir / "tokenizer.json", graph::dumpJson(tokenizers::tokenizerJson(spec, added), 2));
  } else {
    // GPT-2's vocab.json holds "<|endoftext|>" as its last entry.
    tokenizers::BpeSpec with_end = spec;
    with_end.vocab.emplace_back("<|endoftext|>", added[0].id);
    writeText(dir / "vocab.json", tokenizers::vocabJson(with_end));
    writeText(dir / "merges.txt", tokenizers::mergesTxt(spec));
  }
}

NamedArrays randomGptParameters(const gpt::GptConfig& c, Rng& rng) {
  NamedArrays params;
  for (const auto& [name, shape] : gptReferenceShapes(c)) {
    const bool gain = name.size() > 2 && name.substr(name.size() - 2) == ".g";
    params[name] = rng.normal(size_t(shape.numel()), gain ? 1.0f : 0.0f, 0.3f);
  }
  return params;
}

}  // namespace vkgrad::test
