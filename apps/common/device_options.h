// --device, --validation, --memory-limit and --device-profile, which every program takes with the
// same help, and the vk::Context they ask for. The rule itself (an index or name substring, else
// VKGRAD_DEVICE, else discrete > integrated > any) is the engine's: vk::deviceSelector,
// vk::selectDevice.
#pragma once

#include <string>

#include "common/cli.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

void declareDeviceOptions(Cli& cli);

// The parsed options for vk::Context (or vk::deviceSelector); a device that matches nothing
// fails naming "--device", or VKGRAD_DEVICE when that is where the choice came from. A
// --memory-limit that is not a size is a UsageError.
vk::ContextOptions contextOptions(const Cli& cli);

// Whether the validation layer reported anything; if so "<program>: the validation layer
// reported N messages" on stderr. A run with --validation exits 1 when this is true.
bool validationFailed(size_t messages, const std::string& program);
bool validationFailed(const vk::Context& context, const std::string& program);

}  // namespace vkgrad::apps
