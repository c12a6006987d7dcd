// The VkInstance: created here with optional Khronos validation, or adopted from
// a host app. Validation messages are counted and kept so tests can fail on any.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "vkgrad/vk/vulkan.h"

namespace vkgrad::vk {

class Instance {
 public:
  // Creates a Vulkan 1.2 instance. validation: enable VK_LAYER_KHRONOS_validation and a
  // debug messenger (throws if the layer is not installed). A layer the loader does not list
  // but enables anyway (forced through VK_INSTANCE_LAYERS, as under Wine) is accepted.
  explicit Instance(bool validation);
  // Adopts a host's instance; it is never destroyed here. Validation messages are the host's.
  Instance(VkInstance adopted, PFN_vkGetInstanceProcAddr get_instance_proc_addr);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  VkInstance handle() const { return instance_; }
  bool validation() const { return messenger_ != VK_NULL_HANDLE; }
  std::vector<VkPhysicalDevice> physicalDevices() const;

  // Validation warnings and errors seen so far (each also printed to stderr).
  size_t messageCount() const;
  std::vector<std::string> messages() const;

 private:
  VkDebugUtilsMessengerCreateInfoEXT messengerInfo();
  static VkBool32 VKAPI_PTR onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                      VkDebugUtilsMessageTypeFlagsEXT types,
                                      const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  // volk's global instance-level pointers come from the process's first Instance (e.g.
  // listDevices' temporary one, without debug utils), so this one keeps its own.
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger_ = nullptr;
  bool owned_ = false;
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

// Loads the Vulkan loader once per process; throws a clear Error when it is missing.
void loadVulkanLoader();

}  // namespace vkgrad::vk
