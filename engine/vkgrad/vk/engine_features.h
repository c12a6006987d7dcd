// The optional Vulkan features vkgrad's kernels use, for a host app that creates the device it
// lends the engine (vk::ExternalDevice). The engine picks kernels by what a device offers; on
// an adopted device it may use only what the app enabled, so the app enables what
// EngineFeatures lists (where the device has it) and tells the engine what it enabled
// (ExternalDevice::enabled_features; without it, the engine assumes all it lists).
#pragma once

#include "vkgrad/vk/vulkan.h"

namespace vkgrad::vk {

// The features of one device creation that the engine's kernels depend on.
struct EnabledFeatures {
  bool timeline_semaphore = false;  // required: every submission signals the engine's timeline
  bool fp16 = false, int8 = false, int64 = false, fp64 = false;  // shader arithmetic types
  bool storage_16bit = false, storage_8bit = false;              // 16/8-bit storage buffers
};

// What `info` enables: its pEnabledFeatures, and in its pNext chain a VkPhysicalDeviceFeatures2,
// the Vulkan 1.1 and 1.2 feature structures, or the extension structures those absorbed
// (16-bit and 8-bit storage, float16/int8, timeline semaphores).
EnabledFeatures enabledFeatures(const VkDeviceCreateInfo& info);

// The engine's features that a device offers (timelineSemaphore always), as a pNext chain for
// the app's VkDeviceCreateInfo:
//
//   vkgrad::vk::EngineFeatures features(instance, physical, vkGetInstanceProcAddr);
//   device_info.pNext = features.chain();        // or chain(&app_features): appended
//   vkCreateDevice(physical, &device_info, nullptr, &device);
//   external.enabled_features = vkgrad::vk::enabledFeatures(device_info);
//
// The chain lives as long as this object; it is a VkPhysicalDeviceFeatures2 followed by the
// Vulkan 1.1 and 1.2 feature structures, so the app's own chain must not repeat those three.
class EngineFeatures {
 public:
  EngineFeatures(VkInstance instance, VkPhysicalDevice physical,
                 PFN_vkGetInstanceProcAddr get_instance_proc_addr);
  EngineFeatures(const EngineFeatures&) = delete;
  EngineFeatures& operator=(const EngineFeatures&) = delete;

  // The chain's head, with `next` (the app's structures, or null) after its last structure.
  const void* chain(void* next = nullptr);
  const EnabledFeatures& enabled() const { return enabled_; }

 private:
  VkPhysicalDeviceFeatures2 features_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  VkPhysicalDeviceVulkan11Features f11_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  VkPhysicalDeviceVulkan12Features f12_{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  EnabledFeatures enabled_;
};

}  // namespace vkgrad::vk
