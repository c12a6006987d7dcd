// Just enough SPIR-V reflection to build a pipeline without hand-written layouts:
// the descriptor bindings of set 0 (kind, and whether the shader writes them) and
// the workgroup size after specialization.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vkgrad::vk {

enum class BindingKind { StorageBuffer, UniformBuffer, UniformTexelBuffer, StorageTexelBuffer };

struct BindingInfo {
  uint32_t binding = 0;
  BindingKind kind = BindingKind::StorageBuffer;
  bool writes = false;  // false when declared readonly (or a sampled texel buffer)
};

struct ShaderLayout {
  std::vector<BindingInfo> bindings;  // sorted by binding number, set 0 only
  uint32_t local_size[3] = {1, 1, 1};
};

// spec[i] overrides the specialization constant with constant_id i.
// Throws Error (naming the shader) on malformed SPIR-V or unsupported layouts.
ShaderLayout reflectShader(const std::string& name, std::span<const uint32_t> words,
                           std::span<const uint32_t> spec);

}  // namespace vkgrad::vk
