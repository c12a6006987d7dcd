// A trained VAE on disk, as `vkgrad-vae train --out DIR` writes it and `sample` /
// `reconstruct` read it:
//   DIR/config.json        the VaeConfig and a record of the training run
//   DIR/model.safetensors  the parameters (ParameterStore::save)
// config.json: {"format": "vkgrad-vae", "version": 1, "model": {"image", "hidden": [...],
// "latent", "recon", "beta"}, "training": {...}}.
#pragma once

#include <filesystem>

#include "vkgrad/io/json_io.h"
#include "vkgrad/vae/vae.h"

namespace vkgrad::vae {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kModelFile = "model.safetensors";

struct VaeCheckpoint {
  VaeConfig config;
  graph::Json training = graph::Json::object();  // informational: epochs, test loss, data, ...
};

// Writes DIR/config.json atomically.
void writeConfig(const std::filesystem::path& dir, const VaeCheckpoint& checkpoint);
// Reads DIR/config.json. Throws Error "<path>: <problem>" for a missing directory or file,
// invalid JSON, another format or version, or a missing or invalid field.
VaeCheckpoint readConfig(const std::filesystem::path& dir);

}  // namespace vkgrad::vae
