// A trained ViT on disk, as `vkgrad-vit train --out DIR` writes it and `eval` / `predict`
// read it:
//   DIR/config.json        the VitConfig and a record of the training run
//   DIR/model.safetensors  the parameters (ParameterStore::save)
// config.json: {"format": "vkgrad-vit", "version": 1, "model": {"image", "patch", "classes",
// "width", "layers", "heads", "mlp_ratio", "norm", "activation", "activation_param",
// "dropout", "mean", "stddev"}, "class_names": [...], "training": {...}}. A CNN's model
// object is {"kind": "cnn", "image", "classes", "conv1", "conv2", "hidden", "dropout",
// "augment_pad", "augment_flip", "mean", "stddev"}; one without "kind" is a ViT.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "vkgrad/io/json_io.h"
#include "vkgrad/vit/vit.h"

namespace vkgrad::vit {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kModelFile = "model.safetensors";

struct VitCheckpoint {
  VitConfig config;
  std::vector<std::string> class_names;          // config.classes of them
  graph::Json training = graph::Json::object();  // informational: epochs, accuracy, data, ...
};

// Writes DIR/config.json atomically. Throws Error when the class names do not match.
void writeConfig(const std::filesystem::path& dir, const VitCheckpoint& checkpoint);
// Reads DIR/config.json. Throws Error "<path>: <problem>" for a missing directory or file,
// invalid JSON, another format or version, or a missing or invalid field.
VitCheckpoint readConfig(const std::filesystem::path& dir);

}  // namespace vkgrad::vit
