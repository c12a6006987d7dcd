// The kernel cache: embedded shaders by name, one pipeline per (name, spec constants),
// and clear errors for unknown names and workgroups the device cannot run.
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

TEST_F(KernelTest, OnePipelinePerNameAndSpecConstants) {
  vk::KernelCache& cache = ctx().kernels();
  const size_t before = cache.size();
  const vk::Kernel& a = cache.get("matmul/naive", {16, 4});
  const vk::Kernel& again = cache.get("matmul/naive", {16, 4});
  EXPECT_EQ(&a, &again);
  const vk::Kernel& b = cache.get("matmul/naive", {8, 8});
  EXPECT_NE(&a, &b);
  EXPECT_NE(a.pipeline(), b.pipeline());
  EXPECT_LE(cache.size(), before + 2);
  EXPECT_GE(cache.size(), 2u);

  EXPECT_EQ(a.name(), "matmul/naive");
  EXPECT_EQ(a.localSize(0), 16u);
  EXPECT_EQ(a.localSize(1), 4u);
  EXPECT_EQ(a.localSize(2), 1u);
  EXPECT_EQ(b.localSize(0), 8u);
  ASSERT_EQ(a.bindings().size(), 3u);
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
    ctx().kernels().get("matmul/naive", {too_wide, 1});
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds the device limit"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(ctx().kernels().size(), before);
}

}  // namespace
}  // namespace vkgrad::test
