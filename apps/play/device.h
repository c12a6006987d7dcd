// vkgrad-play's own Vulkan stack: a GLFW window, the instance (optionally with validation
// and synchronisation validation), its surface, and one device with one queue that does
// graphics, compute and present. vkgrad adopts this device (externalDevice()); the app loads
// Vulkan through its own volk, vkgrad through its private, renamed copy.
#pragma once

#include <volk.h>

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <atomic>
#include <string>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"  // VK_CHECK, for the app's calls too

namespace vkgrad::play {

class Device {
 public:
  // Opens a width x height window titled `title` and creates the stack on a device with a
  // queue family that does graphics, compute and present (Vulkan 1.2, timeline semaphores):
  // the one `selector` names (an index or part of a name, as vk::selectDevice reads it), else
  // discrete > integrated > any. Throws Error saying what is missing: a display (run under
  // xvfb-run), the loader, the validation layer, such a device. With validation, every warning and
  // error of the layer is printed to stderr and counted in `messages`, which must outlive the
  // Device (its own destruction is validated too).
  Device(int width, int height, const std::string& title, bool validation,
         const vk::DeviceSelector& selector, std::atomic<size_t>& messages);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  GLFWwindow* window() const { return window_; }
  VkInstance instance() const { return instance_; }
  VkSurfaceKHR surface() const { return surface_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queueFamily() const { return family_; }
  const VkPhysicalDeviceProperties& properties() const { return properties_; }
  // For vkgrad::vk::Context: the same device, queue and loader.
  vk::ExternalDevice externalDevice() const;

  // A memory type among `types` (a VkMemoryRequirements::memoryTypeBits) with `flags`;
  // throws Error when there is none.
  uint32_t memoryType(uint32_t types, VkMemoryPropertyFlags flags) const;

 private:
  static VkBool32 VKAPI_PTR onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                      VkDebugUtilsMessageTypeFlagsEXT types,
                                      const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);
  void createInstance(bool validation);
  void pickPhysicalDevice(const vk::DeviceSelector& selector);
  void createDevice();
  void release();  // what the constructor made so far, in reverse

  GLFWwindow* window_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkSurfaceKHR surface_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties properties_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  std::atomic<size_t>& messages_;  // atomic: the layer may call back from driver threads
};

}  // namespace vkgrad::play
