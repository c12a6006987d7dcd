// A consumer that links the Vulkan loader itself (its prototypes, libvulkan) and trains with
// vkgrad, validation on: exits 0 only if the loss fell and the layer said nothing.
#include <vulkan/vulkan.h>

#include <cstdio>
#include <exception>

#include "train_circles.h"

int main() {
  // The loader's own entry point: vkgrad defines no symbol of this name to shadow it.
  uint32_t version = 0;
  if (vkEnumerateInstanceVersion(&version) != VK_SUCCESS || version < VK_API_VERSION_1_1) {
    std::printf("consumer: the loader's vkEnumerateInstanceVersion failed\n");
    return 1;
  }
  // The engine reports what it cannot do (no device, a device it cannot use, a shape it
  // refuses) as exceptions derived from std::exception, with a message to show as it is.
  try {
    vkgrad::vk::ContextOptions options;
    options.validation = true;
    vkgrad::vk::Context context(options);
    const bool learned = trainCircles(context, "consumer");
    std::printf("consumer: loader %u.%u, %zu validation messages\n", VK_API_VERSION_MAJOR(version),
                VK_API_VERSION_MINOR(version), context.validationMessages().size());
    return learned && context.validationMessages().empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("consumer: %s\n", e.what());
    return 1;
  }
}
