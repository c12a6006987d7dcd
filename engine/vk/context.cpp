#include "vk/context.h"

#include <cstdlib>

#include "vk/error.h"
#include "vk/instance.h"
#include "vk/kernel.h"
#include "vk/memory.h"
#include "vk/staging.h"

namespace vkgrad::vk {

DeviceSelector deviceSelector(const ContextOptions& options) {
  if (!options.device.empty()) return {options.device, options.device_source};
  if (const char* env = std::getenv("VKGRAD_DEVICE"); env && *env) return {env, "VKGRAD_DEVICE"};
  return {"", "automatic"};
}

Context::Context(const ContextOptions& options) {
  const char* env_validation = std::getenv("VKGRAD_VALIDATION");
  const bool validation =
      options.validation || (env_validation && std::string(env_validation) == "1");
  instance_ = std::make_unique<Instance>(validation);

  const auto physical = instance_->physicalDevices();
  std::vector<DeviceInfo> infos;
  for (uint32_t i = 0; i < physical.size(); ++i) infos.push_back(queryDevice(physical[i], i));
  const DeviceSelector selector = deviceSelector(options);
  const uint32_t chosen = selectDevice(infos, selector.text, selector.source);
  physical_ = physical[chosen];
  info_ = infos[chosen];
  queue_family_ = info_.compute_family;

  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;

  // Optional features later kernels may use; enabled only where the device has them.
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.shaderFloat16 = info_.fp16;
  f12.shaderInt8 = info_.int8;
  f12.storageBuffer8BitAccess = info_.storage_8bit;
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = info_.storage_16bit;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f11;
  features.features.shaderInt64 = info_.int64;

  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.pNext = &features;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  VK_CHECK(vkCreateDevice(physical_, &device_info, nullptr, &device_));
  owns_device_ = true;
  volkLoadDeviceTable(&table_, device_);
  table_.vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  try {
    createEngineObjects();
  } catch (...) {
    table_.vkDestroyDevice(device_, nullptr);
    throw;
  }
}

Context::Context(const ExternalDevice& external) {
  if (external.physical_device == VK_NULL_HANDLE || external.device == VK_NULL_HANDLE)
    throw Error("ExternalDevice needs a VkPhysicalDevice and a VkDevice");
  instance_ = std::make_unique<Instance>(external.instance, external.get_instance_proc_addr);
  physical_ = external.physical_device;
  device_ = external.device;
  info_ = queryDevice(physical_, 0);
  if (info_.api_version < VK_API_VERSION_1_2)
    throw Error("the host's device " + info_.name + " supports only Vulkan " +
                versionString(info_.api_version) + "; vkgrad needs 1.2");
  queue_family_ = external.queue_family;
  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &family_count, families.data());
  if (queue_family_ >= family_count || !(families[queue_family_].queueFlags & VK_QUEUE_COMPUTE_BIT))
    throw Error("ExternalDevice queue family " + std::to_string(queue_family_) +
                " does not support compute");
  info_.compute_family = queue_family_;
  info_.compute_only_family = !(families[queue_family_].queueFlags & VK_QUEUE_GRAPHICS_BIT);
  info_.timestamp_valid_bits = families[queue_family_].timestampValidBits;
  volkLoadDeviceTable(&table_, device_);
  table_.vkGetDeviceQueue(device_, queue_family_, external.queue_index, &queue_);
  createEngineObjects();
}

void Context::createEngineObjects() {
  allocator_ = std::make_unique<Allocator>(*this);
  staging_ = std::make_unique<Staging>(*this);
  kernels_ = std::make_unique<KernelCache>(*this);
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) table_.vkDeviceWaitIdle(device_);
  kernels_.reset();
  staging_.reset();
  allocator_.reset();
  if (owns_device_) table_.vkDestroyDevice(device_, nullptr);
}

std::vector<std::string> Context::validationMessages() const {
  return instance_->messages();
}

void Context::waitIdle() {
  VK_CHECK(table_.vkQueueWaitIdle(queue_));
}

void Context::submitAndWait(VkCommandBuffer cmd, VkFence fence) {
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  VK_CHECK(table_.vkResetFences(device_, 1, &fence));
  VK_CHECK(table_.vkQueueSubmit(queue_, 1, &submit, fence));
  VK_CHECK(table_.vkWaitForFences(device_, 1, &fence, VK_TRUE, UINT64_MAX));
}

}  // namespace vkgrad::vk
