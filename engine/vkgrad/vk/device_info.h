// What vkgrad needs to know about a physical device, and how one is chosen:
// by index or name substring (option or VKGRAD_DEVICE), else discrete > integrated > any.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/vk/vulkan.h"

namespace vkgrad::vk {

class Instance;

enum class DeviceType { Other, Integrated, Discrete, Virtual, Cpu };

struct MemoryHeap {
  uint64_t bytes = 0;
  bool device_local = false;
};

// One queue family as vkGetPhysicalDeviceQueueFamilyProperties reports it.
struct QueueFamily {
  bool graphics = false, compute = false, transfer = false;
  uint32_t queues = 0;
};

struct DeviceInfo {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices
  std::string name;
  DeviceType type = DeviceType::Other;
  uint32_t vendor_id = 0, device_id = 0;
  std::string driver_name, driver_info;
  uint32_t api_version = 0, driver_version = 0;

  uint32_t subgroup_size = 0;
  // The sizes the driver may pick for a compute shader's subgroups (0: not reported).
  uint32_t min_subgroup_size = 0, max_subgroup_size = 0;
  bool subgroup_compute = false;     // subgroup ops usable in compute shaders
  bool subgroup_shuffle = false;     // subgroupShuffle
  bool subgroup_arithmetic = false;  // subgroupAdd / subgroupMax
  uint32_t max_shared_memory = 0;    // bytes per workgroup
  uint32_t max_workgroup_size[3] = {};
  uint32_t max_workgroup_invocations = 0;
  uint32_t max_workgroup_count[3] = {};
  uint64_t max_storage_buffer_range = 0;   // bytes one storage binding may span
  uint64_t max_allocation_bytes = 0;       // bytes one vkAllocateMemory may take
  uint64_t max_texel_buffer_elements = 0;  // texels one buffer view may span
  uint64_t min_storage_offset_alignment = 0;
  uint64_t min_texel_offset_alignment = 0;
  uint64_t min_uniform_offset_alignment = 0;
  uint32_t max_push_constants = 0;
  // Descriptors one compute stage may bind, by kind (texel views count as images).
  uint32_t max_storage_buffers = 0, max_uniform_buffers = 0;
  uint32_t max_sampled_images = 0, max_storage_images = 0, max_resources = 0;
  float timestamp_period_ns = 0;  // nanoseconds per timestamp tick
  std::vector<MemoryHeap> heaps;
  bool fp16 = false, int8 = false, fp64 = false, int64 = false;
  bool storage_16bit = false, storage_8bit = false;
  bool vulkan_memory_model = false;  // vulkanMemoryModel and its device scope
  // Tensor cores through VK_NV_cooperative_matrix: a 16x16x16 fp16 x fp16 + fp32 shape for
  // subgroups in compute shaders, with fp16 arithmetic, 16-bit storage, the Vulkan memory
  // model (SPIR-V's cooperative matrices need it) and a fixed subgroup size; the Coopmat
  // matmul needs all of it. coopmat_shapes lists every shape the driver reports
  // ("16x16x16 f16*f16+f32->f32", with
  // " (not subgroup)" appended for other scopes), and khr_coopmat whether it also offers
  // VK_KHR_cooperative_matrix (which Debian 12's glslang 12 cannot compile for).
  bool coopmat = false;
  bool khr_coopmat = false;
  std::vector<std::string> coopmat_shapes;
  // VK_KHR_portability_subset is listed (MoltenVK and other layered drivers): a device that
  // lists it must be created with it enabled, which the Context does.
  bool portability_subset = false;

  // The device profile the engine imposes on this device (vk/device_limits.h), "" for none.
  std::string profile;

  // Every queue family, in index order (an app picks its async-compute queue from these).
  std::vector<QueueFamily> queue_families;
  // Compute queue: a compute-only family when there is one.
  uint32_t compute_family = UINT32_MAX;
  bool compute_only_family = false;
  uint32_t timestamp_valid_bits = 0;  // 0: no timestamps on that queue

  bool isCpu() const { return type == DeviceType::Cpu; }
  // The name for messages: "llvmpipe (...)", with " under device profile mobile" when one is
  // imposed, so that a refusal says it is the profile's.
  std::string label() const {
    return profile.empty() ? name : name + " under device profile " + profile;
  }
  // A workgroup of subgroup_size invocations is always one whole subgroup.
  bool fixedSubgroupSize() const {
    return subgroup_size > 0 && min_subgroup_size == subgroup_size &&
           max_subgroup_size == subgroup_size;
  }
};

const char* deviceTypeName(DeviceType type);
std::string versionString(uint32_t vk_version);

DeviceInfo queryDevice(VkPhysicalDevice device, uint32_t index);

// A device choice and where it came from, for messages and for vkgrad-info.
struct DeviceSelector {
  std::string text;    // decimal index or name substring; empty: automatic
  std::string source;  // the option's name, "VKGRAD_DEVICE", or "automatic" when text is empty
};

// Index into devices of the chosen one. selector: decimal index or case-insensitive name
// substring; empty picks discrete, else integrated, else the first. source names where the
// selector came from, for the error ("VKGRAD_DEVICE"). Throws listing the devices on no match.
uint32_t selectDevice(const std::vector<DeviceInfo>& devices, std::string_view selector,
                      std::string_view source);

// One line per device: "0: llvmpipe (LLVM 15.0.6, 256 bits) [cpu]".
std::string describeDevices(const std::vector<DeviceInfo>& devices);

// Every device the loader sees, through a temporary instance (for vkgrad-info).
std::vector<DeviceInfo> listDevices();
// The same through instance, e.g. one with validation on.
std::vector<DeviceInfo> listDevices(const Instance& instance);

}  // namespace vkgrad::vk
