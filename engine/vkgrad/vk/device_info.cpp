#include "vkgrad/vk/device_info.h"

#include <volk.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include "vkgrad/vk/error.h"
#include "vkgrad/vk/instance.h"

namespace vkgrad::vk {

const char* deviceTypeName(DeviceType type) {
  switch (type) {
    case DeviceType::Integrated:
      return "integrated";
    case DeviceType::Discrete:
      return "discrete";
    case DeviceType::Virtual:
      return "virtual";
    case DeviceType::Cpu:
      return "cpu";
    default:
      return "other";
  }
}

std::string versionString(uint32_t v) {
  return std::to_string(VK_API_VERSION_MAJOR(v)) + "." + std::to_string(VK_API_VERSION_MINOR(v)) +
         "." + std::to_string(VK_API_VERSION_PATCH(v));
}

namespace {

bool hasExtension(VkPhysicalDevice device, const char* name) {
  uint32_t count = 0;
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr) != VK_SUCCESS)
    return false;
  std::vector<VkExtensionProperties> extensions(count);
  if (vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data()) !=
      VK_SUCCESS)
    return false;
  for (const VkExtensionProperties& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

const char* componentName(VkComponentTypeNV type) {
  switch (type) {
    case VK_COMPONENT_TYPE_FLOAT16_NV:
      return "f16";
    case VK_COMPONENT_TYPE_FLOAT32_NV:
      return "f32";
    case VK_COMPONENT_TYPE_FLOAT64_NV:
      return "f64";
    case VK_COMPONENT_TYPE_SINT8_NV:
      return "s8";
    case VK_COMPONENT_TYPE_UINT8_NV:
      return "u8";
    case VK_COMPONENT_TYPE_SINT32_NV:
      return "s32";
    case VK_COMPONENT_TYPE_UINT32_NV:
      return "u32";
    default:
      return "other";
  }
}

// The cooperative matrix shapes of VK_NV_cooperative_matrix, as text, and whether the
// Coopmat matmul's (16x16x16, f16 inputs, f32 accumulator and result, subgroup) is one.
bool queryCoopmatShapes(VkPhysicalDevice device, std::vector<std::string>& shapes) {
  if (!vkGetPhysicalDeviceCooperativeMatrixPropertiesNV) return false;
  uint32_t count = 0;
  if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(device, &count, nullptr) != VK_SUCCESS)
    return false;
  std::vector<VkCooperativeMatrixPropertiesNV> props(
      count, {VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (vkGetPhysicalDeviceCooperativeMatrixPropertiesNV(device, &count, props.data()) != VK_SUCCESS)
    return false;
  bool found = false;
  for (const VkCooperativeMatrixPropertiesNV& m : props) {
    shapes.push_back(
        std::to_string(m.MSize) + "x" + std::to_string(m.NSize) + "x" + std::to_string(m.KSize) +
        " " + componentName(m.AType) + "*" + componentName(m.BType) + "+" + componentName(m.CType) +
        "->" + componentName(m.DType) + (m.scope == VK_SCOPE_SUBGROUP_NV ? "" : " (not subgroup)"));
    found = found ||
            (m.MSize == 16 && m.NSize == 16 && m.KSize == 16 &&
             m.AType == VK_COMPONENT_TYPE_FLOAT16_NV && m.BType == VK_COMPONENT_TYPE_FLOAT16_NV &&
             m.CType == VK_COMPONENT_TYPE_FLOAT32_NV && m.DType == VK_COMPONENT_TYPE_FLOAT32_NV &&
             m.scope == VK_SCOPE_SUBGROUP_NV);
  }
  return found;
}

}  // namespace

namespace {

DeviceType deviceTypeOf(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return DeviceType::Integrated;
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return DeviceType::Discrete;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return DeviceType::Virtual;
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return DeviceType::Cpu;
    default:
      return DeviceType::Other;
  }
}

// The limits the kernels are chosen and checked by.
void readLimits(const VkPhysicalDeviceLimits& limits, DeviceInfo& info) {
  info.max_shared_memory = limits.maxComputeSharedMemorySize;
  for (int i = 0; i < 3; ++i) {
    info.max_workgroup_size[i] = limits.maxComputeWorkGroupSize[i];
    info.max_workgroup_count[i] = limits.maxComputeWorkGroupCount[i];
  }
  info.max_workgroup_invocations = limits.maxComputeWorkGroupInvocations;
  info.max_storage_buffer_range = limits.maxStorageBufferRange;
  info.max_texel_buffer_elements = limits.maxTexelBufferElements;
  info.min_storage_offset_alignment = limits.minStorageBufferOffsetAlignment;
  info.min_texel_offset_alignment = limits.minTexelBufferOffsetAlignment;
  info.min_uniform_offset_alignment = limits.minUniformBufferOffsetAlignment;
  info.max_push_constants = limits.maxPushConstantsSize;
  info.max_storage_buffers = limits.maxPerStageDescriptorStorageBuffers;
  info.max_uniform_buffers = limits.maxPerStageDescriptorUniformBuffers;
  info.max_sampled_images = limits.maxPerStageDescriptorSampledImages;
  info.max_storage_images = limits.maxPerStageDescriptorStorageImages;
  info.max_resources = limits.maxPerStageResources;
  info.timestamp_period_ns = limits.timestampPeriod;
}

// The queue family the engine submits to: one with compute, a compute-only one where the
// device has it (graphics work of the same device then cannot delay it).
void pickComputeFamily(VkPhysicalDevice device, DeviceInfo& info) {
  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, families.data());
  for (uint32_t i = 0; i < family_count; ++i) {
    const VkQueueFlags flags = families[i].queueFlags;
    // Graphics and compute families may leave the transfer bit out: they transfer anyway.
    info.queue_families.push_back(
        {bool(flags & VK_QUEUE_GRAPHICS_BIT), bool(flags & VK_QUEUE_COMPUTE_BIT),
         bool(flags & (VK_QUEUE_TRANSFER_BIT | VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT)),
         families[i].queueCount});
    if (!(flags & VK_QUEUE_COMPUTE_BIT)) continue;
    const bool compute_only = !(flags & VK_QUEUE_GRAPHICS_BIT);
    if (info.compute_family == UINT32_MAX || (compute_only && !info.compute_only_family)) {
      info.compute_family = i;
      info.compute_only_family = compute_only;
      info.timestamp_valid_bits = families[i].timestampValidBits;
    }
  }
}

// The optional features the kernel variants depend on.
void readFeatures(const VkPhysicalDeviceFeatures2& features,
                  const VkPhysicalDeviceVulkan11Features& f11,
                  const VkPhysicalDeviceVulkan12Features& f12, DeviceInfo& info) {
  info.fp16 = f12.shaderFloat16;
  info.int8 = f12.shaderInt8;
  info.fp64 = features.features.shaderFloat64;
  info.int64 = features.features.shaderInt64;
  info.storage_16bit = f11.storageBuffer16BitAccess;
  info.storage_8bit = f12.storageBuffer8BitAccess;
  // With the memory model on, atomics at Device scope (the engine's) need its device scope.
  info.vulkan_memory_model = f12.vulkanMemoryModel && f12.vulkanMemoryModelDeviceScope;
}

void readHeaps(VkPhysicalDevice device, DeviceInfo& info) {
  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    info.heaps.push_back({memory.memoryHeaps[i].size,
                          (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
}

}  // namespace

DeviceInfo queryDevice(VkPhysicalDevice device, uint32_t index) {
  VkPhysicalDeviceSubgroupProperties subgroup{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceMaintenance3Properties maintenance3{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES};
  subgroup.pNext = &maintenance3;
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  driver.pNext = &subgroup;
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &driver;
  // The subgroup size range, where the device can report it (core in 1.3; the instance asks
  // for 1.2, so through the extension): a workgroup of subgroupSize invocations is exactly
  // one subgroup only where the range is a single size.
  VkPhysicalDeviceSubgroupSizeControlPropertiesEXT size_control{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES_EXT};
  if (hasExtension(device, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME)) {
    size_control.pNext = props.pNext;
    props.pNext = &size_control;
  }
  vkGetPhysicalDeviceProperties2(device, &props);

  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES};
  f11.pNext = &f12;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &f11;
  VkPhysicalDeviceCooperativeMatrixFeaturesNV coopmat_features{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceCooperativeMatrixPropertiesNV coopmat_props{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_PROPERTIES_NV};
  const bool nv_coopmat = hasExtension(device, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  if (nv_coopmat) {
    coopmat_features.pNext = f12.pNext;
    f12.pNext = &coopmat_features;
    coopmat_props.pNext = props.pNext;
    props.pNext = &coopmat_props;
    vkGetPhysicalDeviceProperties2(device, &props);
  }
  if (props.properties.apiVersion >= VK_API_VERSION_1_2)
    vkGetPhysicalDeviceFeatures2(device, &features);

  DeviceInfo info;
  info.index = index;
  info.name = props.properties.deviceName;
  info.type = deviceTypeOf(props.properties.deviceType);
  info.vendor_id = props.properties.vendorID;
  info.device_id = props.properties.deviceID;
  info.driver_name = driver.driverName;
  info.driver_info = driver.driverInfo;
  info.api_version = props.properties.apiVersion;
  info.driver_version = props.properties.driverVersion;

  info.subgroup_size = subgroup.subgroupSize;
  info.min_subgroup_size = size_control.minSubgroupSize;
  info.max_subgroup_size = size_control.maxSubgroupSize;
  info.subgroup_compute = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0;
  info.subgroup_shuffle =
      info.subgroup_compute && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_SHUFFLE_BIT);
  info.subgroup_arithmetic =
      info.subgroup_compute && (subgroup.supportedOperations & VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
  readLimits(props.properties.limits, info);
  info.max_allocation_bytes = maintenance3.maxMemoryAllocationSize;

  readHeaps(device, info);

  readFeatures(features, f11, f12, info);
  info.khr_coopmat = hasExtension(device, "VK_KHR_cooperative_matrix");
  info.portability_subset = hasExtension(device, "VK_KHR_portability_subset");
  if (nv_coopmat) {
    const bool shape = queryCoopmatShapes(device, info.coopmat_shapes);
    info.coopmat = shape && coopmat_features.cooperativeMatrix &&
                   (coopmat_props.cooperativeMatrixSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) &&
                   info.fp16 && info.storage_16bit && info.vulkan_memory_model &&
                   info.fixedSubgroupSize();
  }

  pickComputeFamily(device, info);
  return info;
}

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool isIndex(std::string_view text) {
  return !text.empty() && text.size() < 6 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

std::string describeDevices(const std::vector<DeviceInfo>& devices) {
  std::string out;
  for (const auto& d : devices)
    out += "  " + std::to_string(d.index) + ": " + d.name + " [" + deviceTypeName(d.type) + "]\n";
  return out;
}

uint32_t selectDevice(const std::vector<DeviceInfo>& devices, std::string_view selector,
                      std::string_view source) {
  if (devices.empty())
    throw Error(
        "no Vulkan device found; install a GPU driver, or mesa-vulkan-drivers for the CPU "
        "driver lavapipe");
  auto usable = [](const DeviceInfo& d) {
    return d.api_version >= VK_API_VERSION_1_2 && d.compute_family != UINT32_MAX;
  };
  auto reject = [&](const DeviceInfo& d) {
    throw Error(std::string(source) + "='" + std::string(selector) + "' picks " + d.name +
                ", which lacks Vulkan 1.2 or a compute queue; devices:\n" +
                describeDevices(devices));
  };
  // A selector of spaces would match any name with a space in it: it names nothing.
  if (!selector.empty() && selector.find_first_not_of(" \t") == std::string_view::npos)
    throw Error(std::string(source) + "='" + std::string(selector) +
                "' is blank: give a device index or part of a name; devices:\n" +
                describeDevices(devices));
  if (!selector.empty()) {
    if (isIndex(selector)) {
      const unsigned long index = std::stoul(std::string(selector));
      if (index < devices.size()) {
        if (!usable(devices[index])) reject(devices[index]);
        return static_cast<uint32_t>(index);
      }
    } else {
      const std::string needle = lower(selector);
      for (const auto& d : devices)
        if (lower(d.name).find(needle) != std::string::npos) {
          if (!usable(d)) reject(d);
          return d.index;
        }
    }
    throw Error(std::string(source) + "='" + std::string(selector) +
                "' matches no Vulkan device (give an index or part of a name); devices:\n" +
                describeDevices(devices));
  }
  for (DeviceType preferred : {DeviceType::Discrete, DeviceType::Integrated}) {
    for (const auto& d : devices)
      if (d.type == preferred && usable(d)) return d.index;
  }
  for (const auto& d : devices)
    if (usable(d)) return d.index;
  throw Error("no Vulkan device supports Vulkan 1.2 with a compute queue; devices:\n" +
              describeDevices(devices));
}

std::vector<DeviceInfo> listDevices() {
  return listDevices(Instance(/*validation=*/false));
}

std::vector<DeviceInfo> listDevices(const Instance& instance) {
  std::vector<DeviceInfo> out;
  const auto physical = instance.physicalDevices();
  for (uint32_t i = 0; i < physical.size(); ++i) out.push_back(queryDevice(physical[i], i));
  return out;
}

}  // namespace vkgrad::vk
