// vkgrad-vae train's own options (the model, its data and batch), what they make, and the
// header of a training run.
#pragma once

#include <string>
#include <vector>

#include "common/cli.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vae/vae.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

// --data, --hidden, --latent, --recon, --beta, --batch and --limit.
void declareModelOptions(Cli& cli);
// The VaeConfig the options give; UsageError naming what is wrong.
vae::VaeConfig configFromCli(const Cli& cli);
// Class names for captions and the latent plot's legend: Fashion-MNIST's for its folder, the
// label numbers for other data (MNIST).
std::vector<std::string> classNames(const std::string& data);
// The device, the data and the model, on stderr.
void printHeader(const vk::Context& context, const std::string& data, const data::ImageDataset& set,
                 const graph::ParameterStore& store, const vae::VaeConfig& config);

}  // namespace vkgrad::apps
