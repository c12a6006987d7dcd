#include "vkgrad/hf/model.h"

#include <fstream>
#include <sstream>

#include "vkgrad/core/error.h"
#include "vkgrad/hf/gpt2.h"
#include "vkgrad/hf/llama.h"
#include "vkgrad/hf/weights.h"
#include "vkgrad/io/atomic_file.h"

namespace vkgrad::hf {

HfModel readHfModel(const std::filesystem::path& dir) {
  const HfConfig config = readHfConfig(dir);
  HfModel model;
  model.type = config.type;
  if (config.type == ModelType::Gpt2) {
    model.gpt = gpt2Config(config);
    model.parameters = gpt2Parameters(model.gpt, readHfWeights(dir), dir.string());
  } else {
    model.gpt = llamaConfig(config);
    model.parameters = llamaParameters(model.gpt, readHfWeights(dir), dir.string());
  }
  model.stored = model.parameters.front().dtype;
  for (const graph::SavedTensor& t : model.parameters)
    if (t.dtype != model.stored) model.stored = ops::DType::F32;
  return model;
}

void declareHfModel(graph::ParameterStore& store, const HfModel& model, bool frozen) {
  if (!store.all().empty()) throw Error("loadHfModel: the store must be empty");
  // Frozen ones are declared in the format they are stored in, so that a table that fits a
  // binding only in 16 bits (GPT-2's and SmolLM2's token tables on lavapipe) is accepted.
  if (frozen) store.setAddFrozen(model.stored);
  try {
    gpt::declareGpt(store, model.gpt);
  } catch (...) {
    store.setAddFrozen(std::nullopt);
    throw;
  }
  store.setAddFrozen(std::nullopt);
}

void loadHfModel(graph::ParameterStore& store, const HfModel& model, bool frozen) {
  declareHfModel(store, model, frozen);
  std::vector<const graph::SavedTensor*> tensors;
  for (const graph::SavedTensor& t : model.parameters) tensors.push_back(&t);
  store.upload(tensors, "the Hugging Face folder's weights");
}

std::vector<std::string> saveHfModel(const std::filesystem::path& out,
                                     const std::filesystem::path& source,
                                     const gpt::GptConfig& config,
                                     const graph::ParameterStore& store) {
  return saveHfModel(out, source, config, store.download());
}

std::vector<std::string> saveHfModel(const std::filesystem::path& out,
                                     const std::filesystem::path& source,
                                     const gpt::GptConfig& config,
                                     const std::vector<graph::SavedTensor>& parameters) {
  namespace fs = std::filesystem;
  HfConfig hf = readHfConfig(source);
  hf.json["torch_dtype"] = "float32";
  graph::saveSafetensors(out / kWeightsFile, {config.llama ? llamaWeights(config, parameters)
                                                           : gpt2Weights(config, parameters),
                                              {{"format", "pt"}}});
  graph::writeFileAtomically(out / kConfigFile, graph::dumpJson(hf.json, 2) + "\n");
  std::vector<std::string> written{kWeightsFile, kConfigFile};
  for (const char* file : kTokenizerFiles) {
    std::error_code ec;
    if (!fs::is_regular_file(source / file, ec)) continue;
    std::ifstream in(source / file, std::ios::binary);
    if (!in.is_open()) throw Error((source / file).string() + ": cannot read");
    std::ostringstream text;
    text << in.rdbuf();
    graph::writeFileAtomically(out / file, text.str());
    written.push_back(file);
  }
  return written;
}

}  // namespace vkgrad::hf
