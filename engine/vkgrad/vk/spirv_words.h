// The SPIR-V numbers vkgrad's two readers of compiled kernels look for (vk/spirv_reflect.cpp:
// bindings and specialization constants; vk/kernel_fit.cpp: shared-memory sizes and
// capabilities): opcodes, decorations, storage classes and built-ins, from the SPIR-V
// specification, section 3. Only what those readers use.
#pragma once

#include <cstdint>

namespace vkgrad::vk::spirv {

constexpr uint32_t kMagic = 0x07230203;
constexpr uint32_t kHeaderWords = 5;

// Instructions: the first word is (word count << 16) | opcode.
enum : uint32_t {
  kOpName = 5,
  kOpExecutionMode = 16,
  kOpCapability = 17,
  kOpTypeBool = 20,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeMatrix = 24,
  kOpTypeImage = 25,
  kOpTypeSampledImage = 27,
  kOpTypeArray = 28,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpConstantTrue = 41,
  kOpConstantFalse = 42,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpSpecConstantTrue = 48,
  kOpSpecConstantFalse = 49,
  kOpSpecConstant = 50,
  kOpSpecConstantComposite = 51,
  kOpSpecConstantOp = 52,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
};

// Decorations.
enum : uint32_t {
  kDecSpecId = 1,
  kDecBlock = 2,
  kDecBufferBlock = 3,
  kDecBuiltIn = 11,
  kDecNonWritable = 24,
  kDecBinding = 33,
  kDecDescriptorSet = 34,
};

// Storage classes.
enum : uint32_t { kUniformConstant = 0, kUniform = 2, kStorageWorkgroup = 4, kStorageBuffer = 12 };

constexpr uint32_t kBuiltInWorkgroupSize = 25;
constexpr uint32_t kExecutionModeLocalSize = 17;
constexpr uint32_t kDimBuffer = 5;

}  // namespace vkgrad::vk::spirv
