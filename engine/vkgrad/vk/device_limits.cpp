#include "vkgrad/vk/device_limits.h"

#include <algorithm>
#include <cstdlib>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"

namespace vkgrad::vk {

bool DeviceLimits::any() const {
  return !profile.empty() || max_allocation_bytes || max_storage_buffer_range ||
         max_texel_buffer_elements || max_workgroup_invocations || max_workgroup_size[0] ||
         max_workgroup_count[0] || max_shared_memory || max_storage_buffers ||
         max_uniform_buffers || max_sampled_images || max_storage_images || max_resources ||
         min_offset_alignment || no_storage_16bit || no_fp64 || no_subgroup_arithmetic ||
         no_optional;
}

DeviceLimits parseDeviceLimits(const std::string& text, const std::string& source) {
  DeviceLimits limits;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const size_t eq = item.find('=');
    const std::string name = item.substr(0, eq);
    begin = end + 1;
    if (name == "storage16" && eq != std::string::npos && item.substr(eq + 1) == "off") {
      limits.no_storage_16bit = true;
      continue;
    }
    if (name == "subgroup-arithmetic" && eq != std::string::npos && item.substr(eq + 1) == "off") {
      limits.no_subgroup_arithmetic = true;
      continue;
    }
    if ((name == "invocations" || name == "storage-buffers") && eq != std::string::npos) {
      const std::string value = item.substr(eq + 1);
      const bool digits = !value.empty() && value.size() <= 6 &&
                          value.find_first_not_of("0123456789") == std::string::npos;
      const uint32_t n = digits ? uint32_t(std::stoul(value)) : 0;
      if (n == 0)
        throw Error(source + "='" + text + "': " + name + " wants a count (e.g. " + name + "=" +
                    (name == "invocations" ? "128" : "4") + ")");
      (name == "invocations" ? limits.max_workgroup_invocations : limits.max_storage_buffers) = n;
      continue;
    }
    uint64_t* slot = name == "allocation" ? &limits.max_allocation_bytes
                     : name == "storage"  ? &limits.max_storage_buffer_range
                                          : nullptr;
    if ((!slot && name != "shared") || eq == std::string::npos)
      throw Error(source + "='" + text + "': '" + item +
                  "' is not allocation=SIZE, storage=SIZE, shared=SIZE, invocations=N, "
                  "storage-buffers=N, storage16=off or subgroup-arithmetic=off (e.g. "
                  "allocation=1M,storage=64K)");
    const uint64_t bytes = parseMemorySize(item.substr(eq + 1), source + " " + name);
    if (slot)
      *slot = bytes;
    else
      limits.max_shared_memory = uint32_t(std::min<uint64_t>(bytes, UINT32_MAX));
  }
  return limits;
}

DeviceLimits deviceProfile(const std::string& name, const std::string& source) {
  DeviceLimits l;
  if (name.empty() || name == "none") return l;
  l.profile = name;
  if (name == "vulkan12-minimum") {
    // The Vulkan 1.2 specification's "Required Limits" table, and Vulkan 1.1's
    // maxMemoryAllocationSize.
    l.max_allocation_bytes = uint64_t(1) << 30;
    l.max_storage_buffer_range = uint64_t(1) << 27;
    l.max_texel_buffer_elements = 65536;
    l.max_workgroup_invocations = 128;
    l.max_workgroup_size[0] = 128, l.max_workgroup_size[1] = 128, l.max_workgroup_size[2] = 64;
    for (uint32_t& count : l.max_workgroup_count) count = 65535;
    l.max_shared_memory = 16384;
    l.max_storage_buffers = 4;
    l.max_uniform_buffers = 12;
    l.max_sampled_images = 16;
    l.max_storage_images = 4;
    l.max_resources = 128;
    l.min_offset_alignment = 256;
    l.no_storage_16bit = l.no_fp64 = l.no_optional = true;
    return l;
  }
  if (name == "mobile") {
    l.max_workgroup_invocations = 256;
    l.max_workgroup_size[0] = 256, l.max_workgroup_size[1] = 256, l.max_workgroup_size[2] = 64;
    l.max_shared_memory = 32768;
    l.no_storage_16bit = l.no_fp64 = true;
    return l;
  }
  throw Error(source + "='" + name + "' is not a device profile: vulkan12-minimum, mobile or none");
}

namespace {

template <typename T>
void lower(T& value, T to) {
  if (to) value = std::min(value, to);
}

void lowerFeatures(DeviceInfo& info, const DeviceLimits& limits) {
  if (limits.no_storage_16bit || limits.no_optional) {
    info.storage_16bit = false;
    info.coopmat = false;  // its kernel reads 16-bit buffers
  }
  if (limits.no_fp64 || limits.no_optional) info.fp64 = false;
  if (limits.no_subgroup_arithmetic) info.subgroup_arithmetic = false;
  if (limits.no_optional) {
    info.fp16 = info.int8 = info.int64 = info.storage_8bit = false;
    info.subgroup_shuffle = info.subgroup_arithmetic = false;
    info.min_subgroup_size = info.max_subgroup_size = 0;  // no subgroup size control
  }
}

}  // namespace

void lowerLimits(DeviceInfo& info, const DeviceLimits& limits) {
  if (!limits.profile.empty()) info.profile = limits.profile;
  if (limits.max_allocation_bytes)
    info.max_allocation_bytes =
        std::min(info.max_allocation_bytes,
                 std::max<uint64_t>(1 << 16, limits.max_allocation_bytes >> 16 << 16));
  if (limits.max_storage_buffer_range)
    info.max_storage_buffer_range =
        std::min(info.max_storage_buffer_range,
                 std::max<uint64_t>(256, limits.max_storage_buffer_range / 256 * 256));
  lower(info.max_texel_buffer_elements, limits.max_texel_buffer_elements);
  lower(info.max_workgroup_invocations, limits.max_workgroup_invocations);
  for (int axis = 0; axis < 3; ++axis) {
    lower(info.max_workgroup_size[axis], limits.max_workgroup_size[axis]);
    lower(info.max_workgroup_count[axis], limits.max_workgroup_count[axis]);
    info.max_workgroup_size[axis] =
        std::min(info.max_workgroup_size[axis], info.max_workgroup_invocations);
  }
  lower(info.max_shared_memory, limits.max_shared_memory);
  lower(info.max_storage_buffers, limits.max_storage_buffers);
  lower(info.max_uniform_buffers, limits.max_uniform_buffers);
  lower(info.max_sampled_images, limits.max_sampled_images);
  lower(info.max_storage_images, limits.max_storage_images);
  lower(info.max_resources, limits.max_resources);
  if (limits.min_offset_alignment) {
    info.min_storage_offset_alignment =
        std::max(info.min_storage_offset_alignment, limits.min_offset_alignment);
    info.min_texel_offset_alignment =
        std::max(info.min_texel_offset_alignment, limits.min_offset_alignment);
    info.min_uniform_offset_alignment =
        std::max(info.min_uniform_offset_alignment, limits.min_offset_alignment);
  }
  lowerFeatures(info, limits);
}

void imposeLimits(DeviceInfo& info, const std::string& profile_option,
                  const DeviceLimits& limits_option) {
  if (!profile_option.empty()) {
    lowerLimits(info, deviceProfile(profile_option, "device profile"));
  } else if (const char* env = std::getenv("VKGRAD_DEVICE_PROFILE"); env && *env) {
    lowerLimits(info, deviceProfile(env, "VKGRAD_DEVICE_PROFILE"));
  }
  if (const char* env = std::getenv("VKGRAD_LIMITS"); env && *env)
    lowerLimits(info, parseDeviceLimits(env, "VKGRAD_LIMITS"));
  lowerLimits(info, limits_option);
}

}  // namespace vkgrad::vk
