// Whether a specialized kernel fits the device the engine believes in (DeviceInfo, which a
// device profile may have lowered): its workgroup, its shared memory, its descriptors and
// the SPIR-V capabilities it declares. The driver checks only the real device's limits, so
// without this a kernel too wide for a profile would still run; with it, a kernel that does
// not fit is refused before any pipeline is made, by name, with the limit it misses.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/vk/device_info.h"
#include "vkgrad/vk/spirv_reflect.h"

namespace vkgrad::vk {

struct KernelNeeds {
  uint32_t local_size[3] = {1, 1, 1};  // the caller's (the reflected size, specialized)
  // Bytes of Workgroup-storage variables at their natural sizes (scalars 1-8 bytes, vectors
  // and arrays packed, no padding): what a driver counts, within its alignment rules.
  uint64_t shared_bytes = 0;
  std::vector<uint32_t> capabilities;  // OpCapability operands
};

// Reads a module's capabilities and sizes its Workgroup variables with its specialization
// constants set to `bits` (one per entry of `declared`, as resolveSpecConstants returns).
// Throws Error naming the kernel for an array length the reader cannot evaluate.
KernelNeeds readKernelNeeds(const std::string& kernel, std::span<const uint32_t> words,
                            std::span<const SpecConstantInfo> declared,
                            std::span<const uint32_t> bits);

// Throws Error naming the kernel, what it needs, the limit (by its Vulkan name) and the
// device (and profile) when the kernel does not fit.
void requireKernelFits(const std::string& kernel, const KernelNeeds& needs,
                       std::span<const BindingInfo> bindings, const DeviceInfo& device);

}  // namespace vkgrad::vk
