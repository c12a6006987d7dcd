#include "vkgrad/hf/lora.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "vkgrad/core/error.h"
#include "vkgrad/hf/gpt2.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/nn/transformer.h"

namespace vkgrad::hf {

using graph::SavedTensor;

namespace {

namespace fs = std::filesystem;

// PEFT's prefix of every adapter tensor of a causal LM: PeftModel.base_model (LoraModel)
// .model (the transformers model).
constexpr const char* kPeftPrefix = "base_model.model.";

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// (rows, cols) f32 -> (cols, rows).
SavedTensor transpose(const SavedTensor& t, const std::string& name) {
  const SavedTensor f = convertSaved(t, ops::DType::F32);
  const size_t rows = size_t(t.shape[0]), cols = size_t(t.shape[1]);
  SavedTensor out{name, ops::DType::F32, {t.shape[1], t.shape[0]}, f.data};
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out.data[c * rows + r] = f.data[r * cols + c];
  return out;
}

std::string peftName(const HfLinear& l, const char* which) {
  return kPeftPrefix + l.module + "." + which + ".weight";
}

}  // namespace

std::vector<HfLinear> hfLinears(const HfModel& model) {
  std::vector<HfLinear> out;
  if (const auto& llama = model.gpt.llama) {
    // Per layer the seven nn.Linear modules: q, k, v and gate, up as column blocks of the
    // fused products (hf/llama.h's order), o and down whole.
    const gpt::GptConfig& c = model.gpt;
    const int64_t C = c.width, D = C / c.heads, Q = c.heads * D, KV = llama->kv_heads * D;
    const int64_t I = llama->intermediate;
    for (int64_t i = 0; i < c.layers; ++i) {
      const std::string h = "model.layers." + std::to_string(i) + ".", v = nn::blockName(i);
      out.push_back({h + "self_attn.q_proj", v + ".attn.qkv", C, Q, 0});
      out.push_back({h + "self_attn.k_proj", v + ".attn.qkv", C, KV, Q});
      out.push_back({h + "self_attn.v_proj", v + ".attn.qkv", C, KV, Q + KV});
      out.push_back({h + "self_attn.o_proj", v + ".attn.proj", Q, C});
      out.push_back({h + "mlp.gate_proj", v + ".mlp.gate_up", C, I, 0});
      out.push_back({h + "mlp.up_proj", v + ".mlp.gate_up", C, I, I});
      out.push_back({h + "mlp.down_proj", v + ".mlp.proj", I, C});
    }
    return out;
  }
  // GPT-2's products are the Conv1D weights of its blocks: "h.<i>.*.weight" (in, out) mapped
  // onto a Linear's ".w".
  for (const Gpt2Tensor& t : gpt2Tensors(model.gpt))
    if (t.hf.rfind("h.", 0) == 0 && endsWith(t.hf, ".weight") && endsWith(t.vkgrad, ".w"))
      out.push_back({"transformer." + t.hf.substr(0, t.hf.size() - 7),
                     t.vkgrad.substr(0, t.vkgrad.size() - 2), t.shape[0], t.shape[1]});
  return out;
}

std::vector<std::string> defaultLoraTargets(const HfModel& model) {
  if (model.gpt.llama)
    return {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
  return {"c_attn", "c_proj", "c_fc"};
}

std::vector<HfLinear> selectLinears(const std::vector<HfLinear>& linears,
                                    const std::vector<std::string>& targets) {
  if (targets.empty()) throw Error("LoRA: no target modules named");
  std::vector<HfLinear> out;
  for (const std::string& t : targets) {
    bool any = false;
    for (const HfLinear& l : linears)
      any |= !t.empty() && (l.module == t || endsWith(l.module, "." + t));
    if (!any) {
      std::set<std::string> names;  // the last parts of the module names
      for (const HfLinear& l : linears) names.insert(l.module.substr(l.module.rfind('.') + 1));
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      throw Error("LoRA: target module \"" + t + "\" names no product of this model (" + known +
                  ", or a longer suffix such as mlp.c_proj)");
    }
  }
  for (const HfLinear& l : linears)
    for (const std::string& t : targets)
      if (l.module == t || endsWith(l.module, "." + t)) {
        out.push_back(l);
        break;
      }
  return out;
}

bool isHfAdapterFolder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kAdapterConfigFile, ec);
}

HfLora readHfLoraConfig(const fs::path& dir) {
  const std::string where = (dir / kAdapterConfigFile).string();
  std::error_code ec;
  if (!fs::is_regular_file(dir / kAdapterConfigFile, ec))
    throw Error(where + ": missing (a PEFT adapter folder has one)");
  const graph::Json j = graph::readJsonFile(dir / kAdapterConfigFile);
  HfLora lora;
  try {
    if (!j.is_object()) throw Error("not a JSON object");
    const std::string type = configString(j, "peft_type", "");
    if (type != "LORA") throw Error("peft_type \"" + type + "\" is not LORA");
    if (const std::string bias = configString(j, "bias", "none"); bias != "none")
      throw Error("bias \"" + bias + "\" is not supported (trained biases; vkgrad: none)");
    for (const char* flag : {"use_rslora", "use_dora"})
      if (configBool(j, flag, false)) throw Error(std::string(flag) + " is not supported");
    if (j.contains("modules_to_save") && !j["modules_to_save"].is_null() &&
        !j["modules_to_save"].empty())
      throw Error("modules_to_save is not supported (adapters only)");
    lora.config.rank = configInt(j, "r", 8);
    lora.config.alpha = float(configNumber(j, "lora_alpha", 8.0));
    if (lora.config.rank < 1) throw Error("r " + std::to_string(lora.config.rank) + " below 1");
    if (!(lora.config.alpha > 0.0f) || !std::isfinite(lora.config.alpha))
      throw Error("lora_alpha must be finite and positive");
    const auto targets = j.find("target_modules");
    if (targets == j.end() || !targets->is_array())
      throw Error(
          "target_modules must be a list of module names (a regex string is not "
          "supported)");
    for (const graph::Json& t : *targets) {
      if (!t.is_string()) throw Error("target_modules holds a non-string");
      lora.targets.push_back(t.get<std::string>());
    }
    lora.base = configString(j, "base_model_name_or_path", "");
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  return lora;
}

HfLora readHfLora(const fs::path& dir, const HfModel& base) {
  HfLora lora = readHfLoraConfig(dir);
  const std::string where = (dir / kAdapterWeightsFile).string();
  std::map<std::string, SavedTensor> named;
  for (SavedTensor& t : graph::loadSafetensors(dir / kAdapterWeightsFile).tensors)
    named.emplace(t.name, std::move(t));
  std::set<std::string> used;
  for (const HfLinear& l : selectLinears(hfLinears(base), lora.targets)) {
    const int64_t r = lora.config.rank;
    for (const auto& [which, shape, name] :
         {std::tuple{"lora_A", std::vector<int64_t>{r, l.in}, nn::loraA(l.prefix, l.block)},
          std::tuple{"lora_B", std::vector<int64_t>{l.out, r}, nn::loraB(l.prefix, l.block)}}) {
      const std::string file_name = peftName(l, which);
      const auto it = named.find(file_name);
      if (it == named.end())
        throw Error(where + ": tensor \"" + file_name + "\" " + graph::dimsText(shape) +
                    " is missing");
      if (it->second.shape != shape || !ops::isFloat(it->second.dtype))
        throw Error(where + ": tensor \"" + file_name + "\" is " +
                    graph::dimsText(it->second.shape) + " but " + graph::dimsText(shape) +
                    " for r " + std::to_string(r) + " and the base model's " + l.module +
                    " (an adapter of another model?)");
      lora.tensors.push_back(transpose(it->second, name));
      used.insert(file_name);
    }
  }
  for (const auto& [name, t] : named)
    if (!used.count(name))
      throw Error(where + ": tensor \"" + name + "\" " + graph::dimsText(t.shape) +
                  " is not an adapter of the targets " + kAdapterConfigFile + " names");
  return lora;
}

void checkHfLora(const HfModel& model, const HfLora& lora) {
  for (const HfLinear& l : selectLinears(hfLinears(model), lora.targets))
    if (lora.config.rank < 1 || lora.config.rank > std::min(l.in, l.out))
      throw Error("LoRA on " + l.module + " (" + std::to_string(l.in) + ", " +
                  std::to_string(l.out) + "): rank " + std::to_string(lora.config.rank) +
                  " must be in [1, min(in, out) = " + std::to_string(std::min(l.in, l.out)) + "]");
}

void adaptHfLora(graph::ParameterStore& store, const HfModel& model, const HfLora& lora,
                 bool train) {
  checkHfLora(model, lora);
  for (const auto& p : store.all()) {
    if (p->frozen) continue;
    store.setFrozen(p->name, true);
    if (model.stored != ops::DType::F32) store.setStorage(p->name, model.stored);
  }
  for (const HfLinear& l : selectLinears(hfLinears(model), lora.targets)) {
    nn::declareLora(store, l.prefix, lora.config, l.block,
                    l.block == nn::kWholeProduct ? nn::kWholeProduct : l.block + l.out);
    if (!train) {
      store.setFrozen(nn::loraA(l.prefix, l.block), true);
      store.setFrozen(nn::loraB(l.prefix, l.block), true);
    }
  }
}

void loadHfLora(graph::ParameterStore& store, const HfModel& model, const HfLora& lora, bool train,
                uint64_t seed) {
  checkHfLora(model, lora);
  declareHfModel(store, model, /*frozen=*/true);
  adaptHfLora(store, model, lora, train);
  std::vector<SavedTensor> adapters = nn::loraInitialValues(store, seed);
  if (!lora.tensors.empty()) {
    std::map<std::string, const SavedTensor*> given;
    for (const SavedTensor& t : lora.tensors) given[t.name] = &t;
    for (SavedTensor& t : adapters)
      if (const auto it = given.find(t.name); it != given.end()) t = *it->second;
  }
  std::vector<const SavedTensor*> tensors;
  for (const SavedTensor& t : model.parameters) tensors.push_back(&t);
  for (const SavedTensor& t : adapters) tensors.push_back(&t);
  store.upload(tensors, "the Hugging Face folder's weights and the adapters");
}

std::vector<std::string> saveHfLora(const fs::path& out, const HfModel& model, const HfLora& lora,
                                    const graph::ParameterStore& store) {
  std::map<std::string, SavedTensor> values;
  for (SavedTensor& t : store.download()) values.emplace(t.name, std::move(t));
  graph::Checkpoint file{{}, {{"format", "pt"}}};
  for (const HfLinear& l : selectLinears(hfLinears(model), lora.targets)) {
    file.tensors.push_back(
        transpose(values.at(nn::loraA(l.prefix, l.block)), peftName(l, "lora_A")));
    file.tensors.push_back(
        transpose(values.at(nn::loraB(l.prefix, l.block)), peftName(l, "lora_B")));
  }
  graph::Json config = {{"peft_type", "LORA"},
                        {"task_type", "CAUSAL_LM"},
                        {"base_model_name_or_path", lora.base},
                        {"r", lora.config.rank},
                        {"lora_alpha", lora.config.alpha},
                        {"lora_dropout", 0.0},
                        {"target_modules", lora.targets},
                        // GPT-2's products are Conv1D layers (see the header).
                        {"fan_in_fan_out", model.type == ModelType::Gpt2},
                        {"bias", "none"},
                        {"modules_to_save", nullptr},
                        {"init_lora_weights", true},
                        {"inference_mode", true},
                        {"use_rslora", false},
                        {"use_dora", false}};
  graph::saveSafetensors(out / kAdapterWeightsFile, file);
  graph::writeFileAtomically(out / kAdapterConfigFile, graph::dumpJson(config, 2) + "\n");
  return {kAdapterWeightsFile, kAdapterConfigFile};
}

}  // namespace vkgrad::hf
