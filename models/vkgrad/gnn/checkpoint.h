// A trained GNN on disk, as `vkgrad-gnn train --out DIR` writes it:
//   DIR/config.json        the GnnConfig and a record of the training run
//   DIR/model.safetensors  the parameters (ParameterStore::save)
// config.json: {"format": "vkgrad-gnn", "version": 1, "model": {"model", "in", "hidden",
// "classes", "layers", "heads", "graph_level", "dropout"}, "class_names": [...],
// "training": {...}}.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "vkgrad/gnn/gnn.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::gnn {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kModelFile = "model.safetensors";

struct GnnCheckpoint {
  GnnConfig config;
  std::vector<std::string> class_names;          // config.classes of them
  graph::Json training = graph::Json::object();  // informational: epochs, accuracy, data, ...
};

// Writes DIR/config.json atomically. Throws Error when the class names do not match.
void writeConfig(const std::filesystem::path& dir, const GnnCheckpoint& checkpoint);
// Reads DIR/config.json. Throws Error "<path>: <problem>" for a missing directory or file,
// invalid JSON, another format or version, or a missing or invalid field.
GnnCheckpoint readConfig(const std::filesystem::path& dir);

}  // namespace vkgrad::gnn
