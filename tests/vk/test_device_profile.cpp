// Device profiles and the kernel-fit check (vk/device_limits.h, vk/kernel_fit.h): a profile
// lowers what the Context believes, and a kernel that does not fit what it believes is refused
// before any pipeline is made, naming the limit. scripts/test-profiles.sh runs the whole suite
// under each profile.
#include <string>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/softmax.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/kernel_fit.h"
#include "vkgrad/vk/recorder.h"
#include "vkgrad/vk/shader_registry.h"

namespace vkgrad::test {
namespace {

vk::Context profiled(const std::string& profile, const std::string& limits = "") {
  vk::ContextOptions options;
  options.validation = true;
  options.profile = profile;
  if (!limits.empty()) options.limits = vk::parseDeviceLimits(limits, "test");
  return vk::Context(options);
}

// The shared memory the reader finds in `kernel` with `spec`.
uint64_t sharedBytes(const char* kernel, std::span<const vk::SpecConstant> spec) {
  const vk::EmbeddedShader* shader = vk::findShader(kernel);
  EXPECT_NE(shader, nullptr) << kernel;
  const std::span<const uint32_t> words(shader->words, shader->word_count);
  const vk::ShaderLayout layout = vk::reflectShader(kernel, words);
  const std::vector<uint32_t> bits = vk::resolveSpecConstants(kernel, layout.spec_constants, spec);
  return vk::readKernelNeeds(kernel, words, layout.spec_constants, bits).shared_bytes;
}

vk::SpecConstants tiled(uint32_t wx, uint32_t wy, uint32_t bk, uint32_t tm, uint32_t tn) {
  return {{"WX", wx},
          {"WY", wy},
          {"BK", bk},
          {"TM", tm},
          {"TN", tn},
          {"RESIDUAL", false},
          {"a_dtype", 0u},
          {"b_dtype", 0u},
          {"c_dtype", 0u},
          {"bias_dtype", 0u},
          {"residual_dtype", 0u}};
}

vk::SpecConstants naive(uint32_t x, uint32_t y) {
  return {{"local_size_x", x}, {"local_size_y", y}, {"RESIDUAL", false}, {"a_dtype", 0u},
          {"b_dtype", 0u},     {"c_dtype", 0u},     {"bias_dtype", 0u},  {"residual_dtype", 0u}};
}

// Asks for the kernel and expects a refusal containing `limit`, with no pipeline made.
void expectRefused(vk::Context& context, const char* kernel, const vk::SpecConstants& spec,
                   const std::string& limit) {
  const size_t before = context.kernels().size();
  try {
    context.kernels().get(kernel, spec);
    ADD_FAILURE() << kernel << " was built past " << limit;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(limit), std::string::npos) << what;
    EXPECT_NE(what.find(std::string("kernel '") + kernel + "'"), std::string::npos) << what;
  }
  EXPECT_EQ(context.kernels().size(), before);
}

TEST(DeviceProfile, LimitsParseTheComputeKeys) {
  const vk::DeviceLimits l =
      vk::parseDeviceLimits("invocations=128,shared=16K,subgroup-arithmetic=off", "x");
  EXPECT_EQ(l.max_workgroup_invocations, 128u);
  EXPECT_EQ(l.max_shared_memory, 16384u);
  EXPECT_TRUE(l.no_subgroup_arithmetic);
  for (const char* bad : {"invocations=", "invocations=12x", "invocations=0", "shared=1.5K",
                          "subgroup-arithmetic=on"}) {
    try {
      vk::parseDeviceLimits(bad, "VKGRAD_LIMITS");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("VKGRAD_LIMITS"), std::string::npos) << e.what();
    }
  }
}

TEST(DeviceProfile, NamedProfilesLowerWhatTheContextBelieves) {
  vk::Context minimum = profiled("vulkan12-minimum");
  const vk::DeviceInfo& m = minimum.info();
  EXPECT_EQ(m.profile, "vulkan12-minimum");
  EXPECT_NE(m.label().find("under device profile vulkan12-minimum"), std::string::npos);
  EXPECT_LE(m.max_workgroup_invocations, 128u);
  EXPECT_LE(m.max_workgroup_size[0], 128u);
  EXPECT_LE(m.max_workgroup_size[2], 64u);
  EXPECT_LE(m.max_shared_memory, 16384u);
  EXPECT_LE(m.max_storage_buffers, 4u);
  EXPECT_LE(m.max_texel_buffer_elements, 65536u);
  EXPECT_LE(m.max_storage_buffer_range, uint64_t(1) << 27);
  EXPECT_GE(m.min_storage_offset_alignment, 256u);
  EXPECT_FALSE(m.storage_16bit || m.storage_8bit || m.fp16 || m.fp64 || m.int64 || m.int8);
  EXPECT_FALSE(m.subgroup_shuffle || m.subgroup_arithmetic || m.coopmat);
  EXPECT_FALSE(m.fixedSubgroupSize());

  vk::Context mobile = profiled("mobile");
  const vk::DeviceInfo& p = mobile.info();
  const vk::DeviceInfo real = profiled("none").info();
  EXPECT_EQ(p.max_workgroup_invocations, std::min(256u, real.max_workgroup_invocations));
  EXPECT_EQ(p.max_shared_memory, std::min(32768u, real.max_shared_memory));
  EXPECT_FALSE(p.storage_16bit || p.fp64);
  EXPECT_EQ(p.fp16, real.fp16);  // what the profile does not name stays the device's
  EXPECT_EQ(p.max_storage_buffers, real.max_storage_buffers);
  EXPECT_EQ(p.subgroup_arithmetic, real.subgroup_arithmetic);

  try {
    vk::deviceProfile("tiny", "VKGRAD_DEVICE_PROFILE");
    ADD_FAILURE() << "an unknown profile was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("VKGRAD_DEVICE_PROFILE='tiny' is not a device profile: "
                                         "vulkan12-minimum, mobile"),
              std::string::npos)
        << e.what();
  }
}

// The reader sizes Workgroup arrays whose lengths are specialization-constant expressions,
// from the shaders' declarations: matmul/tiled's As[BK * (BM + 1)] and Bs[BK * BN] floats
// with BM = WY * TM and BN = WX * TN; cached_attention/forward's qs[D], ps[CHUNK] and red[W];
// cross_entropy/mean's two reduce scratch arrays of gl_WorkGroupSize.x floats.
TEST(KernelFit, SharedMemoryIsReadFromTheSpirvWithItsSpecialization) {
  const auto tiled_bytes = [](uint32_t wx, uint32_t wy, uint32_t bk, uint32_t tm, uint32_t tn) {
    const uint32_t bm = wy * tm, bn = wx * tn;
    return uint64_t(4) * (bk * (bm + 1) + bk * bn);
  };
  EXPECT_EQ(sharedBytes("matmul/tiled", tiled(16, 16, 16, 4, 4)), tiled_bytes(16, 16, 16, 4, 4));
  EXPECT_EQ(sharedBytes("matmul/tiled", tiled(8, 4, 8, 2, 4)), tiled_bytes(8, 4, 8, 2, 4));
  const vk::SpecConstants cached{{"D", 33u},
                                 {"W", 64u},
                                 {"CHUNK", 256u},
                                 {"q_dtype", 0u},
                                 {"k_cache_dtype", 0u},
                                 {"v_cache_dtype", 0u},
                                 {"o_dtype", 0u}};
  EXPECT_EQ(sharedBytes("cached_attention/forward", cached), uint64_t(4) * (33 + 256 + 64));
  const vk::SpecConstants mean{
      {"local_size_x", 96u}, {"losses_dtype", 0u}, {"mean_dtype", 0u}, {"saved_dtype", 0u}};
  EXPECT_EQ(sharedBytes("cross_entropy/mean", mean), uint64_t(2) * 96 * 4);
}

TEST(KernelFit, AKernelPastWhatTheContextBelievesIsRefusedNamingTheLimit) {
  vk::Context minimum = profiled("vulkan12-minimum");
  // a, b, c, bias and residual: five storage buffers.
  expectRefused(minimum, "matmul/naive", naive(8, 8), "needs 5 storage buffers");
  expectRefused(minimum, "matmul/naive", naive(8, 8),
                "allows 4 (maxPerStageDescriptorStorageBuffers)");

  // matmul/tiled's tiles: 4 * (BK * (BM + 1) + BK * BN) bytes, BM = WY * TM, BN = WX * TN.
  vk::Context small = profiled("none", "invocations=128,shared=4K");
  expectRefused(small, "matmul/naive", naive(16, 16), "needs 256 invocations per workgroup; ");
  expectRefused(small, "matmul/naive", naive(16, 16), "(maxComputeWorkGroupInvocations)");
  EXPECT_NO_THROW(small.kernels().get("matmul/naive", naive(16, 8)));
  expectRefused(small, "matmul/tiled", tiled(8, 8, 16, 4, 4),
                "needs 4160 bytes of shared memory; ");
  expectRefused(small, "matmul/tiled", tiled(8, 8, 16, 4, 4), "(maxComputeSharedMemorySize)");
  EXPECT_NO_THROW(small.kernels().get("matmul/tiled", tiled(8, 8, 8, 2, 2)));

  vk::Context mobile = profiled("mobile");
  expectRefused(mobile, "convert/convert.s16",
                {{"local_size_x", 64u}, {"src_dtype", 1u}, {"dst_dtype", 0u}},
                "needs storageBuffer16BitAccess, which");
}

// Without subgroup arithmetic the row kernels take their ".nsa" builds, whose reductions go
// through shared memory alone (shaders/common/reduce.glsl): the capability check would refuse
// the usual builds, so a right answer here is the fallback's. Every softmax layout (one
// subgroup or a workgroup per row, storage or texel reads) on rows of 1 to 1,000 columns,
// against the double reference at the softmax tests' tolerance.
TEST(SubgroupArithmeticOff, RowKernelsTakeTheSharedMemoryReductions) {
  vk::Context context = profiled("none", "subgroup-arithmetic=off");
  ASSERT_FALSE(context.info().subgroup_arithmetic);
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const int64_t n : {1, 7, 64, 300, 1000}) {
    const ops::Shape shape{5, n};
    const std::vector<float> x = rng.uniform(size_t(5 * n), -4.0f, 4.0f);
    std::vector<float> want(x.size());
    ops::ref::softmax(x.data(), want.data(), shape.rows(), shape.back());
    for (const ops::SoftmaxVariant variant :
         {ops::SoftmaxVariant::Auto, ops::SoftmaxVariant::WorkgroupStorage,
          ops::SoftmaxVariant::WorkgroupTexel, ops::SoftmaxVariant::SubgroupStorage,
          ops::SoftmaxVariant::SubgroupTexel}) {
      SCOPED_TRACE(std::string(ops::softmaxVariantName(variant)) + ", n " + std::to_string(n));
      DeviceTensor dx = upload(context, shape, x);
      DeviceTensor dy = poisoned(context, shape);
      vk::Recorder rec(context);
      ops::softmax(rec, dx.view(), dy.view(), variant);
      rec.submit();
      EXPECT_TRUE(allClose(download(context, dy), want, 2e-6));
    }
  }
  EXPECT_TRUE(context.validationMessages().empty());
}

}  // namespace
}  // namespace vkgrad::test
