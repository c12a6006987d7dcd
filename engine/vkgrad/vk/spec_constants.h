// Specialization constants by name: a kernel's caller names each of the shader's
// constants (its GLSL identifier) with a value of the GLSL type, and the names are
// resolved against the SPIR-V when the pipeline is requested. Every constant the shader
// declares must be given, exactly once, with its type; a name the shader lacks is an
// error. So a variant is spelled out at its call site, and neither a swapped pair nor a
// forgotten ACCUMULATE can fall back on a position or a default.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/vk/spirv_reflect.h"

namespace vkgrad::vk {

// A value with its GLSL type: bool, int32_t (int), uint32_t (uint) or float. Any other
// C++ type (size_t, double, an enum) does not compile: cast it to the shader's type.
class SpecValue {
 public:
  SpecValue(bool v) : type_(SpecType::Bool), bits_(v ? 1u : 0u) {}
  SpecValue(int32_t v) : type_(SpecType::Int), bits_(uint32_t(v)) {}
  SpecValue(uint32_t v) : type_(SpecType::Uint), bits_(v) {}
  SpecValue(float v) : type_(SpecType::Float), bits_(std::bit_cast<uint32_t>(v)) {}
  template <class T>
  SpecValue(T) = delete;

  SpecType type() const { return type_; }
  uint32_t bits() const { return bits_; }  // as a VkSpecializationInfo carries it

 private:
  SpecType type_;
  uint32_t bits_;
};

// {"ACCUMULATE", accumulate}: the name is the GLSL identifier of the constant_id
// declaration, or local_size_x (y, z) for a bare local_size_x_id (spirv_reflect.h).
struct SpecConstant {
  std::string_view name;
  SpecValue value;
};

using SpecConstants = std::vector<SpecConstant>;  // for lists built up by the caller

// The bits of every constant in `declared` (reflected, sorted by constant_id) from
// `given`. Throws Error naming the kernel and the constant for a name the shader lacks, a
// name given twice, a value of another type, or a declared constant not given.
std::vector<uint32_t> resolveSpecConstants(const std::string& kernel,
                                           std::span<const SpecConstantInfo> declared,
                                           std::span<const SpecConstant> given);

}  // namespace vkgrad::vk
