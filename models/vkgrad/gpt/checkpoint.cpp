#include "vkgrad/gpt/checkpoint.h"

#include <fstream>
#include <sstream>

#include "vkgrad/core/error.h"

namespace vkgrad::gpt {

using graph::Json;
using graph::jsonBool;
using graph::jsonMember;
using graph::jsonNumber;
using graph::jsonObject;
using graph::jsonPositive;
using graph::jsonString;

namespace {

constexpr int kVersion = 1;

}  // namespace

void writeConfig(const std::filesystem::path& dir, const GptCheckpoint& checkpoint) {
  const GptConfig& c = checkpoint.config;
  if (c.vocab != checkpoint.vocab.size())
    throw Error("writeConfig: the model's vocab " + std::to_string(c.vocab) +
                " differs from the vocabulary's " + std::to_string(checkpoint.vocab.size()));
  const Json model = {
      {"vocab", c.vocab},
      {"layers", c.layers},
      {"heads", c.heads},
      {"width", c.width},
      {"context", c.context},
      {"norm", nn::normName(c.norm)},
      {"tie_weights", c.tie_weights},
      {"activation", ops::activationName(c.activation.kind)},
      {"activation_param", c.activation.param},
      {"dropout", c.dropout},
  };
  graph::writeCheckpointFile(dir, kConfigFile, "vkgrad-gpt", kVersion, model, checkpoint.training,
                             {{"vocab_bytes", checkpoint.vocab.toJson()}});
}

GptCheckpoint readConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kConfigFile;
  const std::string where = path.string();
  const Json root = graph::readCheckpointFile(dir, kConfigFile, "vkgrad-gpt");
  try {
    graph::jsonCheckFormat(root, "vkgrad-gpt", kVersion);
    const Json& m = jsonObject(root, "model");
    GptCheckpoint cp;
    cp.config.vocab = jsonPositive(m, "vocab");
    cp.config.layers = jsonPositive(m, "layers");
    cp.config.heads = jsonPositive(m, "heads");
    cp.config.width = jsonPositive(m, "width");
    cp.config.context = jsonPositive(m, "context");
    cp.config.norm = nn::normFromName(jsonString(m, "norm"));
    cp.config.tie_weights = jsonBool(m, "tie_weights");
    cp.config.activation = {nn::mlpActivationFromName(jsonString(m, "activation")),
                            float(jsonNumber(m, "activation_param"))};
    cp.config.dropout = float(jsonNumber(m, "dropout"));
    cp.config.validate();
    cp.vocab = ByteVocab::fromJson(jsonMember(root, "vocab_bytes"));
    if (cp.vocab.size() != cp.config.vocab)
      throw Error("the vocabulary has " + std::to_string(cp.vocab.size()) +
                  " bytes but the model " + std::to_string(cp.config.vocab));
    if (const auto t = root.find("training"); t != root.end()) cp.training = *t;
    return cp;
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace vkgrad::gpt
