#include "gpt/checkpoint.h"

#include <fstream>
#include <sstream>

#include "graph/atomic_file.h"
#include "vk/error.h"

namespace vkgrad::gpt {

using graph::Json;

namespace {

constexpr int kVersion = 1;

ops::Activation activationFromName(const std::string& name) {
  for (ops::Activation a : {ops::Activation::GeluTanh, ops::Activation::GeluErf,
                            ops::Activation::LeakyRelu, ops::Activation::Relu})
    if (name == ops::activationName(a)) return a;
  throw Error("unknown activation \"" + name + "\"");
}

const Json& member(const Json& object, const char* key) {
  const Json* v = object.find(key);
  if (!v) throw Error(std::string("missing \"") + key + "\"");
  return *v;
}

int64_t positive(const Json& object, const char* key) {
  const uint64_t v = member(object, key).asUint();
  if (v == 0 || v > (uint64_t(1) << 31))
    throw Error(std::string("\"") + key + "\" must be in [1, 2^31], got " + std::to_string(v));
  return int64_t(v);
}

}  // namespace

void writeConfig(const std::filesystem::path& dir, const GptCheckpoint& checkpoint) {
  const GptConfig& c = checkpoint.config;
  if (c.vocab != checkpoint.vocab.size())
    throw Error("writeConfig: the model's vocab " + std::to_string(c.vocab) +
                " differs from the vocabulary's " + std::to_string(checkpoint.vocab.size()));
  const Json model = Json::object({
      {"vocab", Json::number(double(c.vocab))},
      {"layers", Json::number(double(c.layers))},
      {"heads", Json::number(double(c.heads))},
      {"width", Json::number(double(c.width))},
      {"context", Json::number(double(c.context))},
      {"norm", Json::string(nn::normName(c.norm))},
      {"tie_weights", Json::boolean(c.tie_weights)},
      {"activation", Json::string(ops::activationName(c.activation.kind))},
      {"activation_param", Json::number(c.activation.param)},
      {"dropout", Json::number(c.dropout)},
  });
  const Json root = Json::object({{"format", Json::string("vkgrad-gpt")},
                                  {"version", Json::number(kVersion)},
                                  {"model", model},
                                  {"vocab_bytes", checkpoint.vocab.toJson()},
                                  {"training", checkpoint.training}});
  graph::writeFileAtomically(dir / kConfigFile, root.dump() + "\n");
}

GptCheckpoint readConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kConfigFile;
  const std::string where = path.string();
  if (!std::filesystem::is_directory(dir))
    throw Error(dir.string() + ": no such checkpoint directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open (is this a vkgrad-gpt checkpoint directory?)");
  std::stringstream text;
  text << in.rdbuf();
  try {
    const Json root = Json::parse(text.str());
    if (root.kind() != Json::Kind::Object) throw Error("not a JSON object");
    if (member(root, "format").asString() != "vkgrad-gpt")
      throw Error("format is not \"vkgrad-gpt\"");
    if (member(root, "version").asUint() != kVersion)
      throw Error("version " + std::to_string(member(root, "version").asUint()) +
                  " is not supported (this build reads version " + std::to_string(kVersion) + ")");
    const Json& m = member(root, "model");
    GptCheckpoint cp;
    cp.config.vocab = positive(m, "vocab");
    cp.config.layers = positive(m, "layers");
    cp.config.heads = positive(m, "heads");
    cp.config.width = positive(m, "width");
    cp.config.context = positive(m, "context");
    const std::string norm = member(m, "norm").asString();
    if (norm != nn::normName(nn::Norm::Pre) && norm != nn::normName(nn::Norm::Post))
      throw Error("unknown norm \"" + norm + "\"");
    cp.config.norm = norm == nn::normName(nn::Norm::Pre) ? nn::Norm::Pre : nn::Norm::Post;
    cp.config.tie_weights = member(m, "tie_weights").asBool();
    cp.config.activation = {activationFromName(member(m, "activation").asString()),
                            float(member(m, "activation_param").asNumber())};
    cp.config.dropout = float(member(m, "dropout").asNumber());
    cp.config.validate();
    cp.vocab = ByteVocab::fromJson(member(root, "vocab_bytes"));
    if (cp.vocab.size() != cp.config.vocab)
      throw Error("the vocabulary has " + std::to_string(cp.vocab.size()) +
                  " bytes but the model " + std::to_string(cp.config.vocab));
    if (const Json* t = root.find("training")) cp.training = *t;
    return cp;
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
}

}  // namespace vkgrad::gpt
