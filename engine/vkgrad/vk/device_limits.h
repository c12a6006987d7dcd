// What the engine believes a device offers, lowered on purpose: limits (VKGRAD_LIMITS) and
// named device profiles (VKGRAD_DEVICE_PROFILE) make any device look like a smaller one, so
// that the paths a small or mobile GPU takes (a narrower workgroup, less shared memory, no
// 16-bit storage, a binding split in pieces) run and are tested here. Everything in the engine
// reads DeviceInfo, so a lowered value is obeyed everywhere; a kernel that cannot fit is
// refused by name with the limit it misses (vk/kernel_fit.h).
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/vk/device_info.h"

namespace vkgrad::vk {

// Limits to lower; 0 (false) leaves the device's.
struct DeviceLimits {
  std::string profile;                     // the named profile these came from, if any
  uint64_t max_allocation_bytes = 0;       // maxMemoryAllocationSize
  uint64_t max_storage_buffer_range = 0;   // maxStorageBufferRange
  uint64_t max_texel_buffer_elements = 0;  // maxTexelBufferElements
  uint32_t max_workgroup_invocations = 0;  // maxComputeWorkGroupInvocations
  uint32_t max_workgroup_size[3] = {};     // maxComputeWorkGroupSize
  uint32_t max_workgroup_count[3] = {};    // maxComputeWorkGroupCount
  uint32_t max_shared_memory = 0;          // maxComputeSharedMemorySize
  uint32_t max_storage_buffers = 0;        // maxPerStageDescriptorStorageBuffers
  uint32_t max_uniform_buffers = 0;        // maxPerStageDescriptorUniformBuffers
  uint32_t max_sampled_images = 0;         // maxPerStageDescriptorSampledImages (texel views)
  uint32_t max_storage_images = 0;         // maxPerStageDescriptorStorageImages (texel views)
  uint32_t max_resources = 0;              // maxPerStageResources
  uint64_t min_offset_alignment = 0;       // raises min{Storage,Texel,Uniform}OffsetAlignment
  bool no_storage_16bit = false;           // as a device without storageBuffer16BitAccess
  bool no_fp64 = false;                    // shaderFloat64
  bool no_subgroup_arithmetic = false;     // VK_SUBGROUP_FEATURE_ARITHMETIC_BIT
  bool no_optional = false;                // no fp16/int8/fp64/int64 arithmetic, 8/16-bit storage,
                             // subgroup shuffle/arithmetic, subgroup size control, coopmat
  bool any() const;
};

// "allocation=1M,storage=64K,storage16=off": comma-separated limits to lower (sizes as
// parseMemorySize's; storage is maxStorageBufferRange, allocation maxMemoryAllocationSize,
// invocations maxComputeWorkGroupInvocations, shared maxComputeSharedMemorySize,
// storage-buffers maxPerStageDescriptorStorageBuffers;
// storage16=off takes 16-bit storage buffers away, subgroup-arithmetic=off subgroup
// arithmetic). Throws Error naming `source` for an
// unknown name or a bad value.
DeviceLimits parseDeviceLimits(const std::string& text, const std::string& source);

// The named profiles:
//  - "vulkan12-minimum": every limit at the least Vulkan 1.2 requires (128 invocations and
//    (128, 128, 64) per workgroup, 16 KiB of shared memory, 2^27-byte bindings, 2^30-byte
//    allocations, 65,536-element texel views, 4 storage buffers per stage, ...) and no optional
//    feature at all;
//  - "mobile": 256 invocations, (256, 256, 64), 32 KiB of shared memory, no fp64 and no 16-bit
//    storage (a Raspberry Pi 5 or an Adreno 6xx class GPU).
// "" or "none": nothing lowered. Throws Error naming `source` and the profiles otherwise.
DeviceLimits deviceProfile(const std::string& name, const std::string& source);

// The lower of each of info's limits and limits' (a lowered binding range stays a multiple
// of 256 bytes, as every binding offset is); sets info.profile.
void lowerLimits(DeviceInfo& info, const DeviceLimits& limits);

// What a Context imposes: the profile (option, else VKGRAD_DEVICE_PROFILE), then
// VKGRAD_LIMITS and the limits option on top (each value the lowest of them).
void imposeLimits(DeviceInfo& info, const std::string& profile_option,
                  const DeviceLimits& limits_option);

}  // namespace vkgrad::vk
