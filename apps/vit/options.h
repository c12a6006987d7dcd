// vkgrad-vit train's own options (the model, its data and batch) and what they make.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.h"
#include "vkgrad/vit/vit.h"

namespace vkgrad::apps {

// --data, the model's shape, augmentation, --batch, --limit and --class-names.
void declareModelOptions(Cli& cli);
// The VitConfig the options give; UsageError naming what is wrong.
vit::VitConfig configFromCli(const Cli& cli);
// --class-names: comma-separated, one per class; the default names Fashion-MNIST's.
std::vector<std::string> classNames(const Cli& cli, int64_t classes);

}  // namespace vkgrad::apps
