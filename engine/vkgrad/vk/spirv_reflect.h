// Just enough SPIR-V reflection to build a pipeline without hand-written layouts:
// the descriptor bindings of set 0 (kind, and whether the shader writes them), the
// workgroup size, and the specialization constants by name, id and type.
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

// 32 bits each: a bool crosses as a VkBool32.
enum class SpecType { Bool, Int, Uint, Float };
const char* specTypeName(SpecType type);  // "bool", "int", "uint", "float": GLSL's words

struct SpecConstantInfo {
  // The GLSL identifier (its OpName). A workgroup dimension set by local_size_x_id (y, z)
  // with no named constant of the same id is "local_size_x" ("local_size_y", ...).
  std::string name;
  uint32_t id = 0;  // its constant_id
  SpecType type = SpecType::Uint;
  uint32_t default_bits = 0;  // the declared value, as a VkSpecializationInfo would carry it
};

constexpr uint32_t kNoSpecId = ~0u;

struct ShaderLayout {
  std::vector<BindingInfo> bindings;  // sorted by binding number, set 0 only
  // The workgroup size without specialization, and per axis the constant_id that
  // specializes it (kNoSpecId for a literal size).
  uint32_t local_size[3] = {1, 1, 1};
  uint32_t local_size_id[3] = {kNoSpecId, kNoSpecId, kNoSpecId};
  std::vector<SpecConstantInfo> spec_constants;  // one per constant_id, sorted by id
};

// Throws Error (naming the shader) on malformed SPIR-V, unsupported layouts, and
// specialization constants without a name (a module compiled with names stripped), of a
// type other than 32-bit bool/int/uint/float, or two names for one constant_id.
ShaderLayout reflectShader(const std::string& name, std::span<const uint32_t> words);

}  // namespace vkgrad::vk
