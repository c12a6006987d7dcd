#include "common/device_options.h"

#include <cstdio>

namespace vkgrad::apps {

void declareDeviceOptions(Cli& cli) {
  cli.option("device",
             "device index or part of its name (default: VKGRAD_DEVICE, else discrete > "
             "integrated > any)");
  cli.flag("validation", "enable the Khronos validation layer; any message fails the run");
  cli.option("memory-limit",
             "device memory the engine may take (512M, 2G or bytes; default: VKGRAD_MEMORY_LIMIT, "
             "else none)");
  cli.option("device-profile",
             "believe the device offers no more than a smaller one: vulkan12-minimum (the Vulkan "
             "1.2 minimums) or mobile (default: VKGRAD_DEVICE_PROFILE, else none)");
}

vk::ContextOptions contextOptions(const Cli& cli) {
  vk::ContextOptions options;
  options.device = cli.get("device");
  options.device_source = "--device";
  options.validation = cli.has("validation");
  if (const std::string limit = cli.get("memory-limit"); !limit.empty()) {
    try {
      options.memory_limit = vk::parseMemorySize(limit, "--memory-limit");
    } catch (const Error& e) {
      cli.fail(e.what());
    }
  }
  options.profile = cli.get("device-profile");
  if (!options.profile.empty()) {
    try {
      vk::deviceProfile(options.profile, "--device-profile");
    } catch (const Error& e) {
      cli.fail(e.what());
    }
  }
  return options;
}

bool validationFailed(size_t messages, const std::string& program) {
  if (messages == 0) return false;
  std::fprintf(stderr, "%s: the validation layer reported %zu messages\n", program.c_str(),
               messages);
  return true;
}

bool validationFailed(const vk::Context& context, const std::string& program) {
  return validationFailed(context.validationMessages().size(), program);
}

}  // namespace vkgrad::apps
