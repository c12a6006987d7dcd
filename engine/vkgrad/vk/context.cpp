#include "vkgrad/vk/context.h"

#include <volk.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>
#include <vector>

#include "vkgrad/vk/engine_features.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/instance.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::vk {

DeviceSelector deviceSelector(const ContextOptions& options) {
  if (!options.device.empty()) return {options.device, options.device_source};
  if (const char* env = std::getenv("VKGRAD_DEVICE"); env && *env) return {env, "VKGRAD_DEVICE"};
  return {"", "automatic"};
}

uint64_t parseMemorySize(const std::string& text, const std::string& source) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  const std::string suffix = text.substr(digits);
  int shift = -1;
  if (suffix.empty())
    shift = 0;
  else if (suffix == "K" || suffix == "k")
    shift = 10;
  else if (suffix == "M" || suffix == "m")
    shift = 20;
  else if (suffix == "G" || suffix == "g")
    shift = 30;
  else if (suffix == "T" || suffix == "t")
    shift = 40;
  uint64_t value = 0;
  const bool ok = digits > 0 && digits <= 12 && shift >= 0 &&
                  (value = std::stoull(text.substr(0, digits))) > 0 &&
                  value <= (uint64_t(1) << (62 - shift));
  if (!ok)
    throw Error(source + "='" + text + "' is not a memory size (e.g. 512M, 2G or a byte count)");
  return value << shift;
}

namespace {

// options.memory_limit, else VKGRAD_MEMORY_LIMIT, else 0 (none).
uint64_t memoryLimit(uint64_t option) {
  if (option) return option;
  if (const char* env = std::getenv("VKGRAD_MEMORY_LIMIT"); env && *env)
    return parseMemorySize(env, "VKGRAD_MEMORY_LIMIT");
  return 0;
}

// options.fp16_matmul, else VKGRAD_MATMUL: "fp16" on, "fp32" or empty off, else an error.
bool fp16MatmulAllowed(bool option) {
  if (option) return true;
  const char* env = std::getenv("VKGRAD_MATMUL");
  if (!env || !*env || std::string(env) == "fp32") return false;
  if (std::string(env) == "fp16") return true;
  throw Error(std::string("VKGRAD_MATMUL='") + env + "' must be fp32 or fp16");
}

// An adopted device offers what it was created with: the engine's kernels see no feature the
// app left off.
void believeEnabled(const EnabledFeatures& enabled, DeviceInfo& info) {
  if (!enabled.timeline_semaphore)
    throw Error("the host's device " + info.name +
                " was created without the timelineSemaphore feature, which vkgrad needs (every "
                "submission signals its timeline); enable it (vk::EngineFeatures lists what "
                "vkgrad uses)");
  info.fp16 = info.fp16 && enabled.fp16;
  info.int8 = info.int8 && enabled.int8;
  info.int64 = info.int64 && enabled.int64;
  info.fp64 = info.fp64 && enabled.fp64;
  info.storage_16bit = info.storage_16bit && enabled.storage_16bit;
  info.storage_8bit = info.storage_8bit && enabled.storage_8bit;
}

}  // namespace

Context::Context(const ContextOptions& options) {
  const uint64_t memory_limit = memoryLimit(options.memory_limit);
  fp16_matmul_ = fp16MatmulAllowed(options.fp16_matmul);
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
  imposeLimits(info_, options.profile, options.limits);
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
  f12.timelineSemaphore = VK_TRUE;  // required by Vulkan 1.2: the engine's submission counter
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.pNext = &f12;
  f11.storageBuffer16BitAccess = info_.storage_16bit;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f11;
  features.features.shaderInt64 = info_.int64;
  // The Coopmat matmul's: cooperative matrices, and the memory model their SPIR-V declares.
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  std::vector<const char*> extensions;
  if (info_.coopmat) {
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    coopmat.cooperativeMatrix = VK_TRUE;
    f12.pNext = &coopmat;
    f12.vulkanMemoryModel = VK_TRUE;
    // With the feature on, atomics at Device scope (embedding's scatter, the confusion
    // counts) need its device scope as well (VUID-RuntimeSpirv-vulkanMemoryModel-06265).
    f12.vulkanMemoryModelDeviceScope = VK_TRUE;
  }

  VkDeviceCreateInfo device_info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  device_info.pNext = &features;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue_info;
  // A portability driver (MoltenVK) must have its subset enabled; the kernels' use of what it
  // leaves out is README's device table.
  if (info_.portability_subset) extensions.push_back("VK_KHR_portability_subset");
  device_info.enabledExtensionCount = uint32_t(extensions.size());
  device_info.ppEnabledExtensionNames = extensions.data();
  VK_CHECK(vkCreateDevice(physical_, &device_info, nullptr, &device_));
  owns_device_ = true;
  table_ = std::make_unique<VolkDeviceTable>();
  volkLoadDeviceTable(table_.get(), device_);
  table_->vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  try {
    createEngineObjects(memory_limit);
  } catch (...) {
    table_->vkDestroyDevice(device_, nullptr);
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
  imposeLimits(info_, "", {});
  // The host's device may not have VK_NV_cooperative_matrix or the memory model enabled:
  // the Coopmat matmul is for devices the engine creates.
  info_.coopmat = false;
  if (info_.api_version < VK_API_VERSION_1_2)
    throw Error("the host's device " + info_.name + " supports only Vulkan " +
                versionString(info_.api_version) + "; vkgrad needs 1.2");
  if (external.enabled_features) believeEnabled(*external.enabled_features, info_);
  queue_family_ = external.queue_family;
  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_, &family_count, families.data());
  if (queue_family_ >= family_count || !(families[queue_family_].queueFlags & VK_QUEUE_COMPUTE_BIT))
    throw Error("ExternalDevice queue family " + std::to_string(queue_family_) +
                " does not support compute");
  if (external.queue_index >= families[queue_family_].queueCount)
    throw Error("ExternalDevice queue index " + std::to_string(external.queue_index) +
                " is past queue family " + std::to_string(queue_family_) + "'s " +
                std::to_string(families[queue_family_].queueCount) + " queue(s)");
  for (uint32_t family : external.concurrent_families) {
    if (family >= family_count)
      throw Error("ExternalDevice concurrent family " + std::to_string(family) + " is not one of " +
                  info_.name + "'s " + std::to_string(family_count) + " queue families");
    if (std::find(concurrent_families_.begin(), concurrent_families_.end(), family) ==
        concurrent_families_.end())
      concurrent_families_.push_back(family);
  }
  if (!concurrent_families_.empty() &&
      std::find(concurrent_families_.begin(), concurrent_families_.end(), queue_family_) ==
          concurrent_families_.end())
    concurrent_families_.insert(concurrent_families_.begin(), queue_family_);
  if (concurrent_families_.size() < 2) concurrent_families_.clear();  // one family: exclusive
  info_.compute_family = queue_family_;
  info_.compute_only_family = !(families[queue_family_].queueFlags & VK_QUEUE_GRAPHICS_BIT);
  info_.timestamp_valid_bits = families[queue_family_].timestampValidBits;
  table_ = std::make_unique<VolkDeviceTable>();
  volkLoadDeviceTable(table_.get(), device_);
  table_->vkGetDeviceQueue(device_, queue_family_, external.queue_index, &queue_);
  fp16_matmul_ = fp16MatmulAllowed(false);
  createEngineObjects(memoryLimit(0));
}

void Context::createEngineObjects(uint64_t memory_limit) {
  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo semaphore{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  semaphore.pNext = &type;
  VK_CHECK(table_->vkCreateSemaphore(device_, &semaphore, nullptr, &timeline_));
  try {
    allocator_ = std::make_unique<Allocator>(*this);
    allocator_->setLimit(memory_limit);
    staging_ = std::make_unique<Staging>(*this);
    kernels_ = std::make_unique<KernelCache>(*this);
  } catch (...) {  // no destructor runs: leave nothing on the (perhaps adopted) device
    kernels_.reset();
    staging_.reset();
    allocator_.reset();
    table_->vkDestroySemaphore(device_, timeline_, nullptr);
    throw;
  }
}

Context::~Context() {
  // Only the engine's own work is waited for: an adopted device's queue may hold the app's.
  if (timeline_ != VK_NULL_HANDLE && !lost_) {
    VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
    info.semaphoreCount = 1;
    info.pSemaphores = &timeline_;
    info.pValues = &submitted_;
    table_->vkWaitSemaphores(device_, &info, UINT64_MAX);
  }
  if (owns_device_) table_->vkDeviceWaitIdle(device_);
  kernels_.reset();
  staging_.reset();
  allocator_.reset();
  if (timeline_ != VK_NULL_HANDLE) table_->vkDestroySemaphore(device_, timeline_, nullptr);
  if (owns_device_) table_->vkDestroyDevice(device_, nullptr);
}

std::vector<std::string> Context::validationMessages() const {
  return instance_->messages();
}

void Context::markLost(const std::string& why) {
  if (lost_) return;  // the first loss is the one to report
  lost_ = true;
  lost_why_ = why;
}

void Context::checkNotLost(const char* what) const {
  if (lost_)
    throw DeviceLostError(what, VK_ERROR_DEVICE_LOST,
                          "refused: the device " + info_.name + " was lost earlier (" + lost_why_ +
                              "); destroy this Context and create a new one");
}

bool Context::finished(uint64_t value) const {
  if (value <= 0) return true;
  checkNotLost("vkGetSemaphoreCounterValue");
  uint64_t reached = 0;
  VK_CHECK(table_->vkGetSemaphoreCounterValue(device_, timeline_, &reached));
  return reached >= value;
}

void Context::wait(uint64_t value) {
  if (value == 0) return;
  if (value > submitted_)
    throw Error("Context::wait(" + std::to_string(value) + "): only " + std::to_string(submitted_) +
                " submissions were made");
  checkNotLost("vkWaitSemaphores");
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &timeline_;
  info.pValues = &value;
  try {
    VK_CHECK(table_->vkWaitSemaphores(device_, &info, UINT64_MAX));
  } catch (const DeviceLostError& e) {
    markLost(e.what());
    throw;
  }
}

uint64_t Context::submit(VkCommandBuffer cmd, std::span<const SemaphoreWait> waits,
                         std::span<const SemaphoreSignal> signals) {
  checkNotLost("vkQueueSubmit");
  std::vector<VkSemaphore> wait_semaphores, signal_semaphores{timeline_};
  std::vector<VkPipelineStageFlags> wait_stages;
  std::vector<uint64_t> wait_values, signal_values{submitted_ + 1};
  for (const SemaphoreWait& w : waits) {
    wait_semaphores.push_back(w.semaphore);
    wait_values.push_back(w.value);
    wait_stages.push_back(w.stages);
  }
  for (const SemaphoreSignal& s : signals) {
    signal_semaphores.push_back(s.semaphore);
    signal_values.push_back(s.value);
  }
  VkTimelineSemaphoreSubmitInfo values{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  values.waitSemaphoreValueCount = uint32_t(wait_values.size());
  values.pWaitSemaphoreValues = wait_values.data();
  values.signalSemaphoreValueCount = uint32_t(signal_values.size());
  values.pSignalSemaphoreValues = signal_values.data();
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.pNext = &values;
  submit.waitSemaphoreCount = uint32_t(wait_semaphores.size());
  submit.pWaitSemaphores = wait_semaphores.data();
  submit.pWaitDstStageMask = wait_stages.data();
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cmd;
  submit.signalSemaphoreCount = uint32_t(signal_semaphores.size());
  submit.pSignalSemaphores = signal_semaphores.data();
  try {
    VK_CHECK(table_->vkQueueSubmit(queue_, 1, &submit, VK_NULL_HANDLE));
  } catch (const DeviceLostError& e) {
    markLost(e.what());
    throw;
  }
  return ++submitted_;
}

}  // namespace vkgrad::vk
