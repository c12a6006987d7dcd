// SPIR-V reflection, on real embedded kernels and on small hand-assembled modules
// that cover the binding kinds, constant types and failure cases no kernel uses yet.
#include "vkgrad/vk/spirv_reflect.h"

#include <bit>
#include <initializer_list>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vkgrad/core/error.h"
#include "vkgrad/vk/shader_registry.h"

namespace vkgrad::test {
namespace {

using vk::BindingKind;
using vk::SpecType;

vk::ShaderLayout reflectEmbedded(const char* name) {
  const vk::EmbeddedShader* shader = vk::findShader(name);
  if (!shader) throw Error(std::string("no embedded kernel ") + name);
  return vk::reflectShader(name, {shader->words, shader->word_count});
}

std::vector<std::string> namesOf(const vk::ShaderLayout& layout) {
  std::vector<std::string> names;
  for (const vk::SpecConstantInfo& c : layout.spec_constants) names.push_back(c.name);
  return names;
}

TEST(SpirvReflect, RealKernelBindingsAndWrites) {
  const vk::ShaderLayout layout = reflectEmbedded("matmul/naive");
  ASSERT_EQ(layout.bindings.size(), 5u);
  for (uint32_t i = 0; i < 5; ++i) {
    EXPECT_EQ(layout.bindings[i].binding, i);
    EXPECT_EQ(layout.bindings[i].kind, BindingKind::StorageBuffer);
  }
  EXPECT_FALSE(layout.bindings[0].writes);  // readonly A
  EXPECT_FALSE(layout.bindings[1].writes);  // readonly B
  EXPECT_TRUE(layout.bindings[2].writes);   // C (read too: beta)
  EXPECT_FALSE(layout.bindings[3].writes);  // readonly bias
  EXPECT_FALSE(layout.bindings[4].writes);  // readonly residual
  // The 16-bit build declares each binding twice (f32 and uint16_t), one binding each.
  const vk::ShaderLayout half = reflectEmbedded("matmul/naive.s16");
  EXPECT_EQ(half.bindings.size(), 5u);
}

// A bare local_size_x_id / local_size_y_id (no named constant, default 1) is named after its
// axis; the size stays 1 until the pipeline specializes it.
TEST(SpirvReflect, RealKernelWorkgroupSizeConstantsAreNamedByAxis) {
  const vk::ShaderLayout layout = reflectEmbedded("matmul/naive");
  EXPECT_EQ(std::vector<uint32_t>(layout.local_size, layout.local_size + 3),
            (std::vector<uint32_t>{1, 1, 1}));
  EXPECT_EQ(std::vector<uint32_t>(layout.local_size_id, layout.local_size_id + 3),
            (std::vector<uint32_t>{0, 1, vk::kNoSpecId}));
  ASSERT_EQ(layout.spec_constants.size(), 8u);
  EXPECT_EQ(namesOf(layout),
            (std::vector<std::string>{"local_size_x", "local_size_y", "RESIDUAL", "a_dtype",
                                      "b_dtype", "c_dtype", "bias_dtype", "residual_dtype"}));
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_EQ(layout.spec_constants[i].id, i);
    EXPECT_EQ(layout.spec_constants[i].type, SpecType::Uint);
    EXPECT_EQ(layout.spec_constants[i].default_bits, 1u);
  }
}

// The constants of the matmul kernel the issue was about, by their GLSL names; SG shares
// constant_id 0 with the workgroup size, so the id is SG's, KIND comes from activation.glsl
// through a macro, and the seven formats from storage.glsl's TEXELS and FLOATS (100 + the
// binding).
TEST(SpirvReflect, RealKernelConstantsByGlslName) {
  const vk::ShaderLayout layout = reflectEmbedded("matmul/texel");
  EXPECT_EQ(namesOf(layout),
            (std::vector<std::string>{
                "SG",           "A_VEC4",    "B_VEC4",   "B_KVEC4",  "A_MVEC4",  "ACCUMULATE",
                "C_VEC4",       "COLSUM",    "KIND",     "ACT_GRAD", "EPI_VEC4", "RESIDUAL",
                "ACT_FWD",      "TM",        "A_dtype",  "B_dtype",  "c_dtype",  "bias_dtype",
                "colsum_dtype", "Epi_dtype", "pre_dtype"}));
  for (uint32_t i = 0; i < layout.spec_constants.size(); ++i)
    EXPECT_EQ(layout.spec_constants[i].id, i < 14 ? i : 100 + (i - 14));
  EXPECT_EQ(layout.local_size_id[0], 0u);
  const vk::SpecConstantInfo& sg = layout.spec_constants[0];
  EXPECT_EQ(sg.type, SpecType::Uint);
  EXPECT_EQ(sg.default_bits, 8u);
  EXPECT_EQ(layout.spec_constants[1].type, SpecType::Bool);  // A_VEC4 = true
  EXPECT_EQ(layout.spec_constants[1].default_bits, 1u);
  EXPECT_EQ(layout.spec_constants[5].type, SpecType::Bool);  // ACCUMULATE = false
  EXPECT_EQ(layout.spec_constants[5].default_bits, 0u);
  EXPECT_EQ(layout.spec_constants[8].type, SpecType::Uint);  // KIND
}

// Kernels added later must reflect too: contiguous set-0 bindings, a sane workgroup, every
// constant named once, and every specialized workgroup dimension one of the constants.
TEST(SpirvReflect, EveryEmbeddedKernelReflects) {
  for (const vk::EmbeddedShader& s : vk::embeddedShaders()) {
    SCOPED_TRACE(s.name);
    const vk::ShaderLayout layout = vk::reflectShader(s.name, {s.words, s.word_count});
    EXPECT_FALSE(layout.bindings.empty());
    for (uint32_t axis = 0; axis < 3; ++axis) EXPECT_GE(layout.local_size[axis], 1u);
    std::set<std::string> names;
    std::set<uint32_t> ids;
    for (const vk::SpecConstantInfo& c : layout.spec_constants) {
      EXPECT_FALSE(c.name.empty());
      EXPECT_TRUE(names.insert(c.name).second) << c.name;
      EXPECT_TRUE(ids.insert(c.id).second) << c.name;
    }
    for (uint32_t axis = 0; axis < 3; ++axis) {
      if (layout.local_size_id[axis] == vk::kNoSpecId) continue;
      EXPECT_TRUE(ids.count(layout.local_size_id[axis])) << "axis " << axis;
    }
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
  // OpName: the string's bytes little-endian in words, NUL-terminated.
  Module& name(uint32_t id, const std::string& text) {
    std::vector<uint32_t> packed((text.size() + 4) / 4, 0u);
    for (size_t i = 0; i < text.size(); ++i)
      packed[i / 4] |= uint32_t(uint8_t(text[i])) << (8 * (i % 4));
    words.push_back(uint32_t(packed.size() + 2) << 16 | 5u);
    words.push_back(id);
    words.insert(words.end(), packed.begin(), packed.end());
    return *this;
  }
};

// Opcodes, decorations and enums from the SPIR-V specification, section 3.
// clang-format off
enum : uint32_t {
  OpExecutionMode = 16, OpTypeBool = 20, OpTypeInt = 21, OpTypeFloat = 22, OpTypeVector = 23,
  OpTypeImage = 25, OpTypeSampledImage = 27, OpTypeArray = 28, OpTypeRuntimeArray = 29,
  OpTypeStruct = 30, OpTypePointer = 32, OpConstant = 43, OpSpecConstantTrue = 48,
  OpSpecConstant = 50, OpSpecConstantComposite = 51, OpVariable = 59, OpDecorate = 71,
  OpMemberDecorate = 72,
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

vk::ShaderLayout reflect(const Module& m) {
  return vk::reflectShader("test/module", m.words);
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
  auto layout = reflect(fixed);
  EXPECT_EQ(layout.local_size[0], 64u);
  EXPECT_EQ(layout.local_size[1], 2u);
  EXPECT_EQ(layout.local_size[2], 1u);
  for (uint32_t axis = 0; axis < 3; ++axis) EXPECT_EQ(layout.local_size_id[axis], vk::kNoSpecId);
  EXPECT_TRUE(layout.spec_constants.empty());

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
  EXPECT_EQ(layout.local_size_id[0], 0u);
  EXPECT_EQ(layout.local_size_id[1], vk::kNoSpecId);
  EXPECT_EQ(layout.local_size_id[2], 2u);
  EXPECT_EQ(namesOf(layout), (std::vector<std::string>{"local_size_x", "local_size_z"}));
  EXPECT_EQ(layout.spec_constants[0].default_bits, 128u);
  EXPECT_EQ(layout.spec_constants[1].id, 2u);

  // A named constant sharing a workgroup dimension's id names it and gives its default.
  spec.op(OpSpecConstant, {2, 45, 256}).op(OpDecorate, {45, SpecId, 0}).name(45, "THREADS");
  layout = reflect(spec);
  EXPECT_EQ(namesOf(layout), (std::vector<std::string>{"THREADS", "local_size_z"}));
  EXPECT_EQ(layout.spec_constants[0].default_bits, 256u);
  EXPECT_EQ(layout.local_size_id[0], 0u);
}

// Ids 50..: bool, int, float constants with OpName; their types and declared bits.
TEST(SpirvReflect, SpecConstantNamesTypesAndDefaults) {
  Module m = base();
  storageBuffer(m, 10, 0, 1);
  m.op(OpTypeBool, {50}).op(OpTypeInt, {51, 32, 1});
  m.op(OpSpecConstantTrue, {50, 60}).op(OpDecorate, {60, SpecId, 3}).name(60, "kFlag");
  m.op(OpSpecConstant, {51, 61, uint32_t(-3)}).op(OpDecorate, {61, SpecId, 1}).name(61, "OFFSET");
  m.op(OpSpecConstant, {1, 62, std::bit_cast<uint32_t>(1.5f)}).op(OpDecorate, {62, SpecId, 7});
  m.name(62, "kScaleFactor");  // longer than one word
  m.op(OpSpecConstant, {2, 63, 9}).op(OpDecorate, {63, SpecId, 0}).name(63, "N");
  const vk::ShaderLayout layout = reflect(m);
  EXPECT_EQ(namesOf(layout), (std::vector<std::string>{"N", "OFFSET", "kFlag", "kScaleFactor"}));
  const auto& c = layout.spec_constants;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].type, SpecType::Uint);
  EXPECT_EQ(c[0].default_bits, 9u);
  EXPECT_EQ(c[1].type, SpecType::Int);
  EXPECT_EQ(c[1].id, 1u);
  EXPECT_EQ(c[1].default_bits, uint32_t(-3));
  EXPECT_EQ(c[2].type, SpecType::Bool);
  EXPECT_EQ(c[2].id, 3u);
  EXPECT_EQ(c[2].default_bits, 1u);
  EXPECT_EQ(c[3].type, SpecType::Float);
  EXPECT_EQ(c[3].id, 7u);
  EXPECT_EQ(c[3].default_bits, std::bit_cast<uint32_t>(1.5f));
}

// Constants a caller could not name, or could not give one value for, fail at reflection.
TEST(SpirvReflect, UnnamedOrAmbiguousSpecConstantsThrow) {
  auto with = [](auto add) {
    Module m = base();
    storageBuffer(m, 10, 0, 1);
    add(m);
    return reflectError(m);
  };
  const std::string unnamed = with([](Module& m) {
    m.op(OpSpecConstant, {2, 60, 1}).op(OpDecorate, {60, SpecId, 4});
  });
  EXPECT_NE(unnamed.find("kernel 'test/module': constant_id 4 has no name"), std::string::npos)
      << unnamed;
  const std::string two_names = with([](Module& m) {
    m.op(OpSpecConstant, {2, 60, 1}).op(OpDecorate, {60, SpecId, 4}).name(60, "A");
    m.op(OpSpecConstant, {2, 61, 1}).op(OpDecorate, {61, SpecId, 4}).name(61, "B");
  });
  EXPECT_NE(two_names.find("constant_id 4 is named both A and B"), std::string::npos) << two_names;
  const std::string two_types = with([](Module& m) {
    m.op(OpSpecConstant, {2, 60, 1}).op(OpDecorate, {60, SpecId, 4}).name(60, "A");
    m.op(OpSpecConstant, {1, 61, 0}).op(OpDecorate, {61, SpecId, 4}).name(61, "A");
  });
  EXPECT_NE(two_types.find("constant_id 4 is declared as both uint and float"), std::string::npos)
      << two_types;
  const std::string wide = with([](Module& m) {
    m.op(OpTypeInt, {50, 64, 0}).op(OpSpecConstant, {50, 60, 1, 0});
    m.op(OpDecorate, {60, SpecId, 2}).name(60, "BIG");
  });
  EXPECT_NE(wide.find("constant_id 2 is not a 32-bit"), std::string::npos) << wide;
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
