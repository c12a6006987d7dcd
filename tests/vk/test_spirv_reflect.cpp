// SPIR-V reflection, on real embedded kernels and on small hand-assembled modules
// that cover the binding kinds and failure cases no kernel uses yet.
#include "vkgrad/vk/spirv_reflect.h"

#include <initializer_list>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vkgrad/core/error.h"
#include "vkgrad/vk/shader_registry.h"

namespace vkgrad::test {
namespace {

using vk::BindingKind;

vk::ShaderLayout reflectEmbedded(const char* name, std::vector<uint32_t> spec = {}) {
  const vk::EmbeddedShader* shader = vk::findShader(name);
  if (!shader) throw Error(std::string("no embedded kernel ") + name);
  return vk::reflectShader(name, {shader->words, shader->word_count}, spec);
}

TEST(SpirvReflect, RealKernelBindingsAndWrites) {
  const vk::ShaderLayout layout = reflectEmbedded("matmul/naive");
  ASSERT_EQ(layout.bindings.size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(layout.bindings[i].binding, i);
    EXPECT_EQ(layout.bindings[i].kind, BindingKind::StorageBuffer);
  }
  EXPECT_FALSE(layout.bindings[0].writes);  // readonly A
  EXPECT_FALSE(layout.bindings[1].writes);  // readonly B
  EXPECT_TRUE(layout.bindings[2].writes);   // writeonly C
}

TEST(SpirvReflect, RealKernelLocalSizeFromSpecConstants) {
  // local_size_x_id / local_size_y_id without defaults: 1 unless specialized.
  auto size = [](const vk::ShaderLayout& l) {
    return std::vector<uint32_t>(l.local_size, l.local_size + 3);
  };
  EXPECT_EQ(size(reflectEmbedded("matmul/naive")), (std::vector<uint32_t>{1, 1, 1}));
  EXPECT_EQ(size(reflectEmbedded("matmul/naive", {16, 16})), (std::vector<uint32_t>{16, 16, 1}));
  EXPECT_EQ(size(reflectEmbedded("matmul/naive", {32})), (std::vector<uint32_t>{32, 1, 1}));
  // Constants the shader does not declare are ignored.
  EXPECT_EQ(size(reflectEmbedded("matmul/naive", {4, 2, 7, 9})), (std::vector<uint32_t>{4, 2, 1}));
}

// Kernels added later must reflect too: contiguous set-0 bindings, a sane workgroup.
TEST(SpirvReflect, EveryEmbeddedKernelReflects) {
  for (const vk::EmbeddedShader& s : vk::embeddedShaders()) {
    SCOPED_TRACE(s.name);
    const vk::ShaderLayout layout = vk::reflectShader(s.name, {s.words, s.word_count}, {});
    EXPECT_FALSE(layout.bindings.empty());
    for (uint32_t axis = 0; axis < 3; ++axis) EXPECT_GE(layout.local_size[axis], 1u);
  }
}

// A minimal module builder: header, then instructions as (opcode, operands).
struct Module {
  std::vector<uint32_t> words{0x07230203u, 0x00010500u, 0u, 1000u, 0u};
  Module& op(uint32_t opcode, std::initializer_list<uint32_t> operands) {
    words.push_back(uint32_t(operands.size() + 1) << 16 | opcode);
    words.insert(words.end(), operands);
    return *this;
  }
};

// Opcodes, decorations and enums from the SPIR-V specification, section 3.
// clang-format off
enum : uint32_t {
  OpExecutionMode = 16, OpTypeInt = 21, OpTypeFloat = 22, OpTypeVector = 23, OpTypeImage = 25,
  OpTypeSampledImage = 27, OpTypeArray = 28, OpTypeRuntimeArray = 29, OpTypeStruct = 30,
  OpTypePointer = 32, OpConstant = 43, OpSpecConstant = 50, OpSpecConstantComposite = 51,
  OpVariable = 59, OpDecorate = 71, OpMemberDecorate = 72,
};
enum : uint32_t {
  SpecId = 1, Block = 2, BufferBlock = 3, BuiltIn = 11, NonWritable = 24, Binding = 33,
  DescriptorSet = 34,
};
enum : uint32_t { UniformConstant = 0, Uniform = 2, StorageBuffer = 12 };
constexpr uint32_t kDimBuffer = 5, kWorkgroupSizeBuiltIn = 25, kLocalSize = 17;
// clang-format on

// Ids: 1 float, 2 uint, 3 runtime float array, 10.. types and variables per test.
Module base() {
  Module m;
  m.op(OpTypeFloat, {1, 32}).op(OpTypeInt, {2, 32, 0}).op(OpTypeRuntimeArray, {3, 1});
  return m;
}

// A storage buffer block (struct id) with `members` float arrays, its pointer and variable.
void storageBuffer(Module& m, uint32_t id, uint32_t binding, uint32_t members) {
  std::vector<uint32_t> struct_ops{id};
  for (uint32_t i = 0; i < members; ++i) struct_ops.push_back(3);
  m.words.push_back(uint32_t(struct_ops.size() + 1) << 16 | OpTypeStruct);
  m.words.insert(m.words.end(), struct_ops.begin(), struct_ops.end());
  m.op(OpDecorate, {id, Block});
  m.op(OpTypePointer, {id + 1, StorageBuffer, id});
  m.op(OpVariable, {id + 1, id + 2, StorageBuffer});
  m.op(OpDecorate, {id + 2, DescriptorSet, 0}).op(OpDecorate, {id + 2, Binding, binding});
}

vk::ShaderLayout reflect(const Module& m, std::vector<uint32_t> spec = {}) {
  return vk::reflectShader("test/module", m.words, spec);
}

std::string reflectError(const Module& m) {
  try {
    reflect(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SpirvReflect, ReadonlyFromVariableOrEveryMember) {
  Module m = base();
  storageBuffer(m, 10, 0, 2);  // both members readonly: reads only
  m.op(OpMemberDecorate, {10, 0, NonWritable}).op(OpMemberDecorate, {10, 1, NonWritable});
  storageBuffer(m, 20, 1, 2);  // one member readonly: writes
  m.op(OpMemberDecorate, {20, 0, NonWritable});
  storageBuffer(m, 30, 2, 1);  // the variable readonly
  m.op(OpDecorate, {32, NonWritable});
  const auto layout = reflect(m);
  ASSERT_EQ(layout.bindings.size(), 3u);
  EXPECT_FALSE(layout.bindings[0].writes);
  EXPECT_TRUE(layout.bindings[1].writes);
  EXPECT_FALSE(layout.bindings[2].writes);
}

// Two variables on one binding (a buffer seen as float[] and as vec4[]) are one descriptor,
// written if either writes; aliases of different descriptor kinds are an error.
TEST(SpirvReflect, AliasedVariablesShareOneBinding) {
  Module m = base();
  storageBuffer(m, 10, 0, 1);
  m.op(OpDecorate, {12, NonWritable});  // binding 0: read only
  storageBuffer(m, 20, 1, 1);
  m.op(OpDecorate, {22, NonWritable});  // binding 1 as a read-only view...
  storageBuffer(m, 30, 1, 1);           // ...and a writable one
  const auto layout = reflect(m);
  ASSERT_EQ(layout.bindings.size(), 2u);
  EXPECT_EQ(layout.bindings[1].binding, 1u);
  EXPECT_EQ(layout.bindings[1].kind, BindingKind::StorageBuffer);
  EXPECT_FALSE(layout.bindings[0].writes);
  EXPECT_TRUE(layout.bindings[1].writes);

  Module mixed = base();
  storageBuffer(mixed, 10, 0, 1);
  mixed.op(OpTypeStruct, {20, 1}).op(OpDecorate, {20, Block});  // a uniform block, binding 0
  mixed.op(OpTypePointer, {21, Uniform, 20}).op(OpVariable, {21, 22, Uniform});
  mixed.op(OpDecorate, {22, DescriptorSet, 0}).op(OpDecorate, {22, Binding, 0});
  EXPECT_NE(reflectError(mixed).find("binding 0 is declared with two descriptor kinds"),
            std::string::npos)
      << reflectError(mixed);
}

TEST(SpirvReflect, BindingKinds) {
  Module m = base();
  // binding 0: uniform block; binding 1: old-style BufferBlock in Uniform storage (a storage
  // buffer); binding 2: samplerBuffer; binding 3: textureBuffer; binding 4: imageBuffer.
  m.op(OpTypeStruct, {10, 1}).op(OpDecorate, {10, Block});
  m.op(OpTypePointer, {11, Uniform, 10}).op(OpVariable, {11, 12, Uniform});
  m.op(OpTypeStruct, {13, 3}).op(OpDecorate, {13, BufferBlock});
  m.op(OpTypePointer, {14, Uniform, 13}).op(OpVariable, {14, 15, Uniform});
  m.op(OpTypeImage, {20, 1, kDimBuffer, 0, 0, 0, 1, 0}).op(OpTypeSampledImage, {21, 20});
  m.op(OpTypePointer, {22, UniformConstant, 21}).op(OpVariable, {22, 23, UniformConstant});
  m.op(OpTypePointer, {24, UniformConstant, 20}).op(OpVariable, {24, 25, UniformConstant});
  m.op(OpTypeImage, {26, 1, kDimBuffer, 0, 0, 0, 2, 1});
  m.op(OpTypePointer, {27, UniformConstant, 26}).op(OpVariable, {27, 28, UniformConstant});
  const uint32_t variables[] = {12, 15, 23, 25, 28};
  for (uint32_t i = 0; i < 5; ++i) m.op(OpDecorate, {variables[i], Binding, 4 - i});  // reversed
  const auto layout = reflect(m);
  ASSERT_EQ(layout.bindings.size(), 5u);
  const BindingKind kinds[] = {BindingKind::StorageTexelBuffer, BindingKind::UniformTexelBuffer,
                               BindingKind::UniformTexelBuffer, BindingKind::StorageBuffer,
                               BindingKind::UniformBuffer};
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(layout.bindings[i].binding, i);
    EXPECT_EQ(layout.bindings[i].kind, kinds[i]) << "binding " << i;
  }
  EXPECT_TRUE(layout.bindings[0].writes);   // imageBuffer without readonly
  EXPECT_FALSE(layout.bindings[1].writes);  // sampled
  EXPECT_TRUE(layout.bindings[3].writes);
  EXPECT_FALSE(layout.bindings[4].writes);  // uniform
}

TEST(SpirvReflect, LocalSizeFromExecutionModeOrWorkgroupSizeBuiltIn) {
  Module fixed = base();
  fixed.op(OpExecutionMode, {99, kLocalSize, 64, 2, 1});
  storageBuffer(fixed, 10, 0, 1);
  auto layout = reflect(fixed, {7, 7});  // no spec constants in this module
  EXPECT_EQ(layout.local_size[0], 64u);
  EXPECT_EQ(layout.local_size[1], 2u);
  EXPECT_EQ(layout.local_size[2], 1u);

  // WorkgroupSize = (spec 0 default 128, constant 1, spec 2 default 4) overrides LocalSize.
  Module spec = base();
  spec.op(OpExecutionMode, {99, kLocalSize, 1, 1, 1});
  spec.op(OpDecorate, {41, SpecId, 0}).op(OpDecorate, {43, SpecId, 2});
  spec.op(OpDecorate, {44, BuiltIn, kWorkgroupSizeBuiltIn});
  spec.op(OpSpecConstant, {2, 41, 128}).op(OpConstant, {2, 42, 1}).op(OpSpecConstant, {2, 43, 4});
  spec.op(OpTypeVector, {40, 2, 3}).op(OpSpecConstantComposite, {40, 44, 41, 42, 43});
  storageBuffer(spec, 10, 0, 1);
  layout = reflect(spec);
  EXPECT_EQ(layout.local_size[0], 128u);
  EXPECT_EQ(layout.local_size[1], 1u);
  EXPECT_EQ(layout.local_size[2], 4u);
  layout = reflect(spec, {32});
  EXPECT_EQ(layout.local_size[0], 32u);
  EXPECT_EQ(layout.local_size[2], 4u);
  layout = reflect(spec, {32, 5, 8});  // constant_id 1 is not in the module
  EXPECT_EQ(layout.local_size[0], 32u);
  EXPECT_EQ(layout.local_size[1], 1u);
  EXPECT_EQ(layout.local_size[2], 8u);
}

TEST(SpirvReflect, UnsupportedOrMalformedModulesThrowNamingTheKernel) {
  EXPECT_NE(reflectError(Module{{1, 2, 3, 4, 5}}).find("kernel 'test/module': not a SPIR-V module"),
            std::string::npos);
  Module truncated = base();
  truncated.words.push_back(5u << 16 | OpDecorate);  // says 5 words, has 1
  EXPECT_NE(reflectError(truncated).find("truncated"), std::string::npos);

  Module gap = base();
  storageBuffer(gap, 10, 0, 1);
  storageBuffer(gap, 20, 2, 1);
  EXPECT_NE(reflectError(gap).find("without gaps"), std::string::npos) << reflectError(gap);

  Module set1 = base();
  storageBuffer(set1, 10, 0, 1);
  set1.op(OpDecorate, {12, DescriptorSet, 1});
  EXPECT_NE(reflectError(set1).find("descriptor set 0"), std::string::npos) << reflectError(set1);

  Module array = base();
  array.op(OpTypeStruct, {10, 3}).op(OpDecorate, {10, Block});
  array.op(OpConstant, {2, 11, 4}).op(OpTypeArray, {12, 10, 11});
  array.op(OpTypePointer, {13, StorageBuffer, 12}).op(OpVariable, {13, 14, StorageBuffer});
  array.op(OpDecorate, {14, Binding, 0});
  EXPECT_NE(reflectError(array).find("arrays of descriptors"), std::string::npos)
      << reflectError(array);
}

}  // namespace
}  // namespace vkgrad::test
