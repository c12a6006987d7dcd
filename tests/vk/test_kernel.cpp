// The kernel cache: embedded shaders by name, one pipeline per (name, spec constants),
// and clear errors for unknown names, constants that do not match the shader's, and
// workgroups the device cannot run.
#include "vkgrad/vk/kernel.h"

#include <set>
#include <string>

#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/shader_registry.h"

namespace vkgrad::test {
namespace {

class KernelTest : public VkTest {};

TEST(ShaderRegistry, EveryKernelIsNamedByItsPathWithoutExtension) {
  const auto shaders = vk::embeddedShaders();
  ASSERT_FALSE(shaders.empty());
  std::set<std::string> names;
  for (const vk::EmbeddedShader& s : shaders) {
    const std::string name = s.name;
    EXPECT_EQ(name.find(".comp"), std::string::npos) << name;
    EXPECT_NE(name.front(), '/') << name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
    ASSERT_GE(s.word_count, 5u) << name;
    EXPECT_EQ(s.words[0], 0x07230203u) << name << ": no SPIR-V magic";
    EXPECT_EQ(vk::findShader(name), &s);
  }
  EXPECT_TRUE(names.count("matmul/naive"));
  EXPECT_EQ(vk::findShader("matmul/naive.comp"), nullptr);
  EXPECT_EQ(vk::findShader(""), nullptr);
}

TEST_F(KernelTest, UnknownNameThrowsListingTheKnownKernels) {
  try {
    ctx().kernels().get("matmul/no-such-kernel");
    FAIL() << "no Error";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("no kernel named 'matmul/no-such-kernel'"), std::string::npos)
        << message;
    for (const vk::EmbeddedShader& s : vk::embeddedShaders())
      EXPECT_NE(message.find(s.name), std::string::npos) << message;
  }
}

// The matmul kernels these tests build bind 5 storage buffers (a, b, c, bias, residual); on a
// device that binds 4 (Vulkan's minimum) the tests take their ".sb4" builds, which have no
// residual binding: the cache is the subject here, not the kernel.
bool fourBuffers() {
  return sharedContext().info().max_storage_buffers < 5;
}
std::string matmulKernel(const std::string& name) {
  return fourBuffers() ? name + ".sb4" : name;
}

// matmul/naive's constants: its workgroup (x, y), and the rest at their f32 defaults.
vk::SpecConstants naiveSpec(uint32_t x, uint32_t y, bool y_first = false) {
  vk::SpecConstants spec{{"a_dtype", 0u}, {"b_dtype", 0u}, {"c_dtype", 0u}, {"bias_dtype", 0u}};
  if (!fourBuffers()) spec.insert(spec.end(), {{"RESIDUAL", false}, {"residual_dtype", 0u}});
  if (y_first) {
    spec.insert(spec.begin(), {{"local_size_y", y}, {"local_size_x", x}});
  } else {
    spec.insert(spec.begin(), {{"local_size_x", x}, {"local_size_y", y}});
  }
  return spec;
}

TEST_F(KernelTest, OnePipelinePerNameAndSpecConstants) {
  vk::KernelCache& cache = ctx().kernels();
  const size_t before = cache.size();
  const std::string naive = matmulKernel("matmul/naive");
  const vk::Kernel& a = cache.get(naive, naiveSpec(16, 4));
  // The order of the names is not part of the key.
  const vk::Kernel& again = cache.get(naive, naiveSpec(16, 4, true));
  EXPECT_EQ(&a, &again);
  const vk::Kernel& b = cache.get(naive, naiveSpec(8, 8));
  EXPECT_NE(&a, &b);
  EXPECT_NE(a.pipeline(), b.pipeline());
  EXPECT_LE(cache.size(), before + 2);
  EXPECT_GE(cache.size(), 2u);

  EXPECT_EQ(a.name(), naive);
  EXPECT_EQ(a.localSize(0), 16u);
  EXPECT_EQ(a.localSize(1), 4u);
  EXPECT_EQ(a.localSize(2), 1u);
  EXPECT_EQ(b.localSize(0), 8u);
  ASSERT_EQ(a.bindings().size(), fourBuffers() ? 4u : 5u);
  EXPECT_FALSE(a.bindings()[0].writes);
  EXPECT_FALSE(a.bindings()[1].writes);
  EXPECT_TRUE(a.bindings()[2].writes);
  EXPECT_NE(a.setLayout(), VK_NULL_HANDLE);
  EXPECT_NE(a.pipelineLayout(), VK_NULL_HANDLE);
}

TEST_F(KernelTest, WorkgroupLargerThanTheDeviceAllowsThrows) {
  const uint32_t too_wide = ctx().info().max_workgroup_size[0] + 1;
  const size_t before = ctx().kernels().size();
  try {
    ctx().kernels().get(matmulKernel("matmul/naive"), naiveSpec(too_wide, 1));
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("maxComputeWorkGroupSize[0]"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ctx().kernels().size(), before);
}

// Each constant reaches the constant_id its name has in the shader: a pair given in the
// "wrong" order is not swapped. matmul/tiled's workgroup is (WX, WY) through local_size_x_id
// = 0 and local_size_y_id = 1, which share WX's and WY's ids.
TEST_F(KernelTest, ConstantsReachTheirNamedIdsInAnyOrder) {
  vk::SpecConstants spec{{"TN", 2u},      {"TM", 4u},      {"BK", 8u},
                         {"WY", 4u},      {"WX", 16u},     {"a_dtype", 0u},
                         {"b_dtype", 0u}, {"c_dtype", 0u}, {"bias_dtype", 0u}};
  if (!fourBuffers()) spec.insert(spec.begin() + 5, {{"RESIDUAL", false}, {"residual_dtype", 0u}});
  const vk::Kernel& k = ctx().kernels().get(matmulKernel("matmul/tiled"), spec);
  EXPECT_EQ(k.localSize(0), 16u);
  EXPECT_EQ(k.localSize(1), 4u);
  EXPECT_EQ(k.localSize(2), 1u);
}

// Every mismatch between the caller's constants and the shader's is an Error naming the
// kernel and the constant when the pipeline is asked for, and no pipeline is made.
// matmul/texel: uint SG (constant_id 0, also the workgroup size) and 13 more.
class KernelSpecTest : public KernelTest {
 protected:
  static vk::SpecConstants texelSpec() {
    return {{"SG", 8u},         {"A_VEC4", true},      {"B_VEC4", true},     {"B_KVEC4", false},
            {"A_MVEC4", false}, {"ACCUMULATE", false}, {"C_VEC4", false},    {"COLSUM", false},
            {"KIND", 0u},       {"ACT_GRAD", false},   {"EPI_VEC4", false},  {"RESIDUAL", false},
            {"ACT_FWD", 0u},    {"TM", 16u},           {"A_dtype", 0u},      {"B_dtype", 0u},
            {"c_dtype", 0u},    {"bias_dtype", 0u},    {"colsum_dtype", 0u}, {"Epi_dtype", 0u},
            {"pre_dtype", 0u}};
  }
  // The message of the Error get() throws, which must leave the cache as it was.
  static std::string buildError(const vk::SpecConstants& spec) {
    const size_t before = ctx().kernels().size();
    std::string message = "(no error)";
    try {
      ctx().kernels().get("matmul/texel", spec);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(ctx().kernels().size(), before) << message;
    return message;
  }
};

TEST_F(KernelSpecTest, EveryConstantByNameBuilds) {
  const vk::Kernel& k = ctx().kernels().get("matmul/texel", texelSpec());
  EXPECT_EQ(k.localSize(0), 8u);  // SG names constant_id 0, the workgroup's x too
  EXPECT_NE(k.pipeline(), VK_NULL_HANDLE);
}

TEST_F(KernelSpecTest, ANameTheShaderLacksIsAnError) {
  vk::SpecConstants spec = texelSpec();
  spec.push_back({"TILE_M", 64u});
  const std::string e = buildError(spec);
  EXPECT_NE(e.find("kernel 'matmul/texel': no specialization constant 'TILE_M'"), std::string::npos)
      << e;
}

TEST_F(KernelSpecTest, AValueOfAnotherTypeIsAnError) {
  vk::SpecConstants spec = texelSpec();
  spec[5] = {"ACCUMULATE", 1u};  // a uint where the shader declares a bool
  std::string e = buildError(spec);
  EXPECT_NE(e.find("kernel 'matmul/texel': specialization constant 'ACCUMULATE' is declared "
                   "bool, given uint"),
            std::string::npos)
      << e;
  spec = texelSpec();
  spec[0] = {"SG", 8.0f};
  e = buildError(spec);
  EXPECT_NE(e.find("'SG' is declared uint, given float"), std::string::npos) << e;
}

TEST_F(KernelSpecTest, ANameGivenTwiceIsAnError) {
  vk::SpecConstants spec = texelSpec();
  spec.push_back({"A_VEC4", false});
  const std::string e = buildError(spec);
  EXPECT_NE(e.find("kernel 'matmul/texel': specialization constant 'A_VEC4' given twice"),
            std::string::npos)
      << e;
}

TEST_F(KernelSpecTest, AConstantOfTheShaderNotGivenIsAnError) {
  vk::SpecConstants spec = texelSpec();
  spec.erase(spec.begin() + 12);  // ACT_FWD
  const std::string e = buildError(spec);
  EXPECT_NE(e.find("kernel 'matmul/texel': specialization constant 'ACT_FWD' (constant_id 12) "
                   "not given"),
            std::string::npos)
      << e;
  EXPECT_NE(buildError({}).find("'SG' (constant_id 0) not given"), std::string::npos);
}

}  // namespace
}  // namespace vkgrad::test
