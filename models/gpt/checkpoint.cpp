#include "gpt/checkpoint.h"

#include <fstream>
#include <sstream>

#include "graph/atomic_file.h"
#include "vk/error.h"

namespace vkgrad::gpt {

using graph::dumpJson;
using graph::Json;
using graph::jsonUint;

namespace {

constexpr int kVersion = 1;

ops::Activation activationFromName(const std::string& name) {
  for (ops::Activation a : {ops::Activation::GeluTanh, ops::Activation::GeluErf,
                            ops::Activation::LeakyRelu, ops::Activation::Relu})
    if (name == ops::activationName(a)) return a;
  throw Error("unknown activation \"" + name + "\"");
}

const Json& member(const Json& object, const std::string& key) {
  const auto it = object.find(key);
  if (it == object.end()) throw Error("missing \"" + key + "\"");
  return *it;
}

const Json& object(const Json& parent, const std::string& key) {
  const Json& v = member(parent, key);
  if (!v.is_object()) throw Error("\"" + key + "\" must be an object, got " + dumpJson(v));
  return v;
}

std::string text(const Json& object, const std::string& key) {
  const Json& v = member(object, key);
  if (!v.is_string()) throw Error("\"" + key + "\" must be a string, got " + dumpJson(v));
  return v.get<std::string>();
}

bool boolean(const Json& object, const std::string& key) {
  const Json& v = member(object, key);
  if (!v.is_boolean()) throw Error("\"" + key + "\" must be true or false, got " + dumpJson(v));
  return v.get<bool>();
}

double number(const Json& object, const std::string& key) {
  const Json& v = member(object, key);
  if (!v.is_number()) throw Error("\"" + key + "\" must be a number, got " + dumpJson(v));
  return v.get<double>();
}

int64_t positive(const Json& object, const std::string& key) {
  const uint64_t v = jsonUint(member(object, key), "\"" + key + "\"");
  if (v == 0 || v > (uint64_t(1) << 31))
    throw Error("\"" + key + "\" must be in [1, 2^31], got " + std::to_string(v));
  return int64_t(v);
}

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
  const Json root = {{"format", "vkgrad-gpt"},
                     {"version", kVersion},
                     {"model", model},
                     {"vocab_bytes", checkpoint.vocab.toJson()},
                     {"training", checkpoint.training}};
  graph::writeFileAtomically(dir / kConfigFile, dumpJson(root) + "\n");
}

GptCheckpoint readConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kConfigFile;
  const std::string where = path.string();
  if (!std::filesystem::is_directory(dir))
    throw Error(dir.string() + ": no such checkpoint directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(where + ": cannot open (is this a vkgrad-gpt checkpoint directory?)");
  std::stringstream contents;
  contents << in.rdbuf();
  const Json root = graph::parseJson(contents.str(), where);
  try {
    if (!root.is_object()) throw Error("not a JSON object");
    if (text(root, "format") != "vkgrad-gpt") throw Error("format is not \"vkgrad-gpt\"");
    const uint64_t version = jsonUint(member(root, "version"), "\"version\"");
    if (version != kVersion)
      throw Error("version " + std::to_string(version) +
                  " is not supported (this build reads version " + std::to_string(kVersion) + ")");
    const Json& m = object(root, "model");
    GptCheckpoint cp;
    cp.config.vocab = positive(m, "vocab");
    cp.config.layers = positive(m, "layers");
    cp.config.heads = positive(m, "heads");
    cp.config.width = positive(m, "width");
    cp.config.context = positive(m, "context");
    const std::string norm = text(m, "norm");
    if (norm != nn::normName(nn::Norm::Pre) && norm != nn::normName(nn::Norm::Post))
      throw Error("unknown norm \"" + norm + "\"");
    cp.config.norm = norm == nn::normName(nn::Norm::Pre) ? nn::Norm::Pre : nn::Norm::Post;
    cp.config.tie_weights = boolean(m, "tie_weights");
    cp.config.activation = {activationFromName(text(m, "activation")),
                            float(number(m, "activation_param"))};
    cp.config.dropout = float(number(m, "dropout"));
    cp.config.validate();
    cp.vocab = ByteVocab::fromJson(member(root, "vocab_bytes"));
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
