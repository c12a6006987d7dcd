#include "vkgrad/gnn/checkpoint.h"

#include "vkgrad/core/error.h"

namespace vkgrad::gnn {

using graph::Json;

namespace {

constexpr int kVersion = 1;

}  // namespace

void writeConfig(const std::filesystem::path& dir, const GnnCheckpoint& checkpoint) {
  const GnnConfig& c = checkpoint.config;
  if (int64_t(checkpoint.class_names.size()) != c.classes)
    throw Error("writeConfig: " + std::to_string(checkpoint.class_names.size()) +
                " class names for " + std::to_string(c.classes) + " classes");
  const Json model = {{"model", modelName(c.model)},  {"in", c.in},          {"hidden", c.hidden},
                      {"classes", c.classes},         {"layers", c.layers},  {"heads", c.heads},
                      {"graph_level", c.graph_level}, {"dropout", c.dropout}};
  graph::writeCheckpointFile(dir, kConfigFile, "vkgrad-gnn", kVersion, model, checkpoint.training,
                             {{"class_names", checkpoint.class_names}});
}

GnnCheckpoint readConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kConfigFile;
  const Json root = graph::readCheckpointFile(dir, kConfigFile, "vkgrad-gnn");
  try {
    graph::jsonCheckFormat(root, "vkgrad-gnn", kVersion);
    const Json& m = graph::jsonObject(root, "model");
    GnnCheckpoint cp;
    GnnConfig& c = cp.config;
    c.model = modelFromName(graph::jsonString(m, "model"));
    c.in = graph::jsonPositive(m, "in", 65536);
    c.hidden = graph::jsonPositive(m, "hidden", 4096);
    c.classes = graph::jsonPositive(m, "classes", 65536);
    c.layers = graph::jsonPositive(m, "layers", 16);
    c.heads = graph::jsonPositive(m, "heads", 64);
    c.graph_level = graph::jsonBool(m, "graph_level");
    // Configs written before dropout was recorded have none: it only acts in training.
    if (m.contains("dropout")) c.dropout = float(graph::jsonNumber(m, "dropout"));
    c.validate();
    cp.class_names = graph::jsonStrings(root, "class_names", size_t(c.classes));
    if (const auto t = root.find("training"); t != root.end()) cp.training = *t;
    return cp;
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
}

}  // namespace vkgrad::gnn
