#include "vkgrad/vk/engine_features.h"

#include "vkgrad/core/error.h"

namespace vkgrad::vk {
namespace {

// The Vulkan structures' common head, for walking a pNext chain.
struct ChainLink {
  VkStructureType sType;
  const ChainLink* pNext;
};

template <typename T>
const T& as(const ChainLink* link) {
  return *reinterpret_cast<const T*>(link);
}

void readCore(const VkPhysicalDeviceFeatures& f, EnabledFeatures& e) {
  e.int64 = e.int64 || f.shaderInt64;
  e.fp64 = e.fp64 || f.shaderFloat64;
}

// One structure of a VkDeviceCreateInfo's chain; others are skipped.
void readLink(const ChainLink* link, EnabledFeatures& e) {
  switch (link->sType) {
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2:
      readCore(as<VkPhysicalDeviceFeatures2>(link).features, e);
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES:
      e.storage_16bit |= bool(as<VkPhysicalDeviceVulkan11Features>(link).storageBuffer16BitAccess);
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES: {
      const auto& f = as<VkPhysicalDeviceVulkan12Features>(link);
      e.timeline_semaphore |= bool(f.timelineSemaphore);
      e.fp16 |= bool(f.shaderFloat16);
      e.int8 |= bool(f.shaderInt8);
      e.storage_8bit |= bool(f.storageBuffer8BitAccess);
      break;
    }
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES:
      e.storage_16bit |=
          bool(as<VkPhysicalDevice16BitStorageFeatures>(link).storageBuffer16BitAccess);
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES:
      e.storage_8bit |= bool(as<VkPhysicalDevice8BitStorageFeatures>(link).storageBuffer8BitAccess);
      break;
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES: {
      const auto& f = as<VkPhysicalDeviceShaderFloat16Int8Features>(link);
      e.fp16 |= bool(f.shaderFloat16);
      e.int8 |= bool(f.shaderInt8);
      break;
    }
    case VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES:
      e.timeline_semaphore |=
          bool(as<VkPhysicalDeviceTimelineSemaphoreFeatures>(link).timelineSemaphore);
      break;
    default:
      break;
  }
}

}  // namespace

EnabledFeatures enabledFeatures(const VkDeviceCreateInfo& info) {
  EnabledFeatures e;
  if (info.pEnabledFeatures) readCore(*info.pEnabledFeatures, e);
  for (auto* link = static_cast<const ChainLink*>(info.pNext); link; link = link->pNext)
    readLink(link, e);
  return e;
}

EngineFeatures::EngineFeatures(VkInstance instance, VkPhysicalDevice physical,
                               PFN_vkGetInstanceProcAddr get_instance_proc_addr) {
  const auto get_features =
      get_instance_proc_addr ? reinterpret_cast<PFN_vkGetPhysicalDeviceFeatures2>(
                                   get_instance_proc_addr(instance, "vkGetPhysicalDeviceFeatures2"))
                             : nullptr;
  if (!get_features)
    throw Error("EngineFeatures needs the instance's vkGetInstanceProcAddr (Vulkan 1.1 or later)");
  VkPhysicalDeviceVulkan12Features has12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features has11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  has11.pNext = &has12;
  VkPhysicalDeviceFeatures2 has{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  has.pNext = &has11;
  get_features(physical, &has);
  f12_.timelineSemaphore = VK_TRUE;
  f12_.shaderFloat16 = has12.shaderFloat16;
  f12_.shaderInt8 = has12.shaderInt8;
  f12_.storageBuffer8BitAccess = has12.storageBuffer8BitAccess;
  f11_.storageBuffer16BitAccess = has11.storageBuffer16BitAccess;
  features_.features.shaderInt64 = has.features.shaderInt64;
  features_.pNext = &f11_;
  f11_.pNext = &f12_;
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features_;
  enabled_ = enabledFeatures(info);
}

const void* EngineFeatures::chain(void* next) {
  f12_.pNext = next;
  return &features_;
}

}  // namespace vkgrad::vk
