// Context creation: device selection by option and environment, the validation
// hookup, and adopting a host app's device without destroying it.
#include "vkgrad/vk/context.h"

#include <volk.h>

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/process.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/engine_features.h"
#include "vkgrad/vk/instance.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

// Sets an environment variable for one scope and restores the old value after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setEnv(name, value);
  }
  ~ScopedEnv() { setEnv(name_, old_ ? old_->c_str() : nullptr); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

vk::ContextOptions withValidation(std::string device = {}) {
  vk::ContextOptions options;
  options.validation = true;
  options.device = std::move(device);
  return options;
}

// Uploads odd-length data through context and reads it back.
void expectRoundTrip(vk::Context& context) {
  Rng rng;
  const std::vector<float> data = rng.uniform(1001);
  vk::Buffer buffer = context.allocator().allocate(data.size() * 4);
  context.staging().upload(buffer, 0, data.data(), data.size() * 4);
  std::vector<float> back(data.size());
  context.staging().download(buffer, 0, back.data(), back.size() * 4);
  EXPECT_EQ(back, data);
}

TEST(Context, UnknownDeviceThrowsListingTheDevices) {
  const auto devices = vk::listDevices();
  ASSERT_FALSE(devices.empty());
  try {
    vk::Context context(withValidation("no-such-device"));
    FAIL() << "created a Context on " << context.info().name;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'no-such-device' matches no Vulkan device"), std::string::npos)
        << message;
    for (const auto& d : devices) EXPECT_NE(message.find(d.name), std::string::npos) << message;
  }
}

TEST(Context, VkgradDeviceEnvironmentIsHonouredAndTheOptionWins) {
  const ScopedEnv env("VKGRAD_DEVICE", "no-such-device");
  try {
    vk::Context context(withValidation());
    FAIL() << "VKGRAD_DEVICE was ignored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("VKGRAD_DEVICE='no-such-device'"), std::string::npos)
        << e.what();
  }
  const auto devices = vk::listDevices();
  ASSERT_FALSE(devices.empty());
  vk::Context context(withValidation(devices[0].name));
  EXPECT_EQ(context.info().name, devices[0].name);
}

// fp16 products (the Coopmat matmul for f32 tensors) are allowed by the option or by
// VKGRAD_MATMUL=fp16; any other value than fp16 or fp32 is an error before a device is made.
TEST(Context, Fp16MatmulFromTheOptionOrVkgradMatmul) {
  {
    const ScopedEnv env("VKGRAD_MATMUL", "fp8");
    try {
      vk::Context context(withValidation());
      FAIL() << "VKGRAD_MATMUL=fp8 was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("VKGRAD_MATMUL='fp8' must be fp32 or fp16"),
                std::string::npos)
          << e.what();
    }
  }
  {
    const ScopedEnv env("VKGRAD_MATMUL", "fp16");
    vk::Context context(withValidation());
    EXPECT_TRUE(context.fp16Matmul());
  }
  const ScopedEnv env("VKGRAD_MATMUL", "fp32");
  vk::Context off(withValidation());
  EXPECT_FALSE(off.fp16Matmul());
  vk::ContextOptions options = withValidation();
  options.fp16_matmul = true;
  vk::Context on(options);
  EXPECT_TRUE(on.fp16Matmul());
  EXPECT_TRUE(on.validationMessages().empty());
}

// deviceSelector is the rule Context applies, so a tool can show the choice without a device.
TEST(Context, DeviceSelectorTakesTheOptionThenVkgradDevice) {
  vk::ContextOptions options = withValidation("1");
  options.device_source = "--device";
  {
    const ScopedEnv env("VKGRAD_DEVICE", "nvidia");
    EXPECT_EQ(vk::deviceSelector(options).text, "1");
    EXPECT_EQ(vk::deviceSelector(options).source, "--device");
    options.device.clear();
    EXPECT_EQ(vk::deviceSelector(options).text, "nvidia");
    EXPECT_EQ(vk::deviceSelector(options).source, "VKGRAD_DEVICE");
  }
  const ScopedEnv empty("VKGRAD_DEVICE", "");
  EXPECT_EQ(vk::deviceSelector(options).text, "");
  EXPECT_EQ(vk::deviceSelector(options).source, "automatic");
  // The option's name is what a failed choice reports.
  options.device = "no-such-device";
  try {
    vk::Context context(options);
    FAIL() << "created a Context on " << context.info().name;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device='no-such-device' matches"), std::string::npos)
        << e.what();
  }
}

class ContextTest : public VkTest {};

TEST_F(ContextTest, SelectsTheRealDeviceByNameAndIndex) {
  const vk::DeviceInfo& info = ctx().info();
  for (const std::string& selector : {info.name, std::to_string(info.index)}) {
    SCOPED_TRACE("selector " + selector);
    vk::Context context(withValidation(selector));
    EXPECT_EQ(context.info().name, info.name);
    EXPECT_EQ(context.info().index, info.index);
    EXPECT_TRUE(context.ownsDevice());
    EXPECT_TRUE(context.instance().validation());
    EXPECT_NE(context.queue(), VK_NULL_HANDLE);
    expectRoundTrip(context);
    EXPECT_TRUE(context.validationMessages().empty());
  }
}

// Without a live layer "zero validation messages" in every other test would prove nothing.
TEST(Context, ValidationLayerCatchesAndCountsAnError) {
  vk::Context context(withValidation());
  ASSERT_TRUE(context.instance().validation());
  ASSERT_EQ(context.instance().messageCount(), 0u);
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = 0;  // invalid: VUID-VkBufferCreateInfo-size-00912
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  VkBuffer buffer = VK_NULL_HANDLE;
  // Captured, so the log of a passing run holds no validation error.
  testing::internal::CaptureStderr();
  context.vk().vkCreateBuffer(context.device(), &info, nullptr, &buffer);
  const std::string printed = testing::internal::GetCapturedStderr();
  if (buffer != VK_NULL_HANDLE) context.vk().vkDestroyBuffer(context.device(), buffer, nullptr);
  EXPECT_NE(printed.find("VUID-VkBufferCreateInfo-size-00912"), std::string::npos) << printed;
  EXPECT_GE(context.instance().messageCount(), 1u);
  const auto messages = context.validationMessages();
  ASSERT_FALSE(messages.empty());
  EXPECT_NE(messages[0].find("VUID-VkBufferCreateInfo-size-00912"), std::string::npos)
      << messages[0];
  EXPECT_EQ(messages[0].rfind("error: ", 0), 0u) << messages[0];
}

// Synchronisation validation is on with the layer (vk/instance.cpp): a copy that reads what a
// fill just wrote, with no barrier between them, is a hazard the tests would report. The
// recorder's own copies put the barrier in and stay silent.
TEST(Context, SynchronisationValidationCatchesAMissingBarrier) {
  vk::Context context(withValidation());
  const VolkDeviceTable& vk = context.vk();
  vk::Buffer a = context.allocator().allocate(256), b = context.allocator().allocate(256);
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = context.queueFamily();
  VkCommandPool pool = VK_NULL_HANDLE;
  ASSERT_EQ(vk.vkCreateCommandPool(context.device(), &pool_info, nullptr, &pool), VK_SUCCESS);
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  ASSERT_EQ(vk.vkAllocateCommandBuffers(context.device(), &alloc, &cmd), VK_SUCCESS);
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  ASSERT_EQ(vk.vkBeginCommandBuffer(cmd, &begin), VK_SUCCESS);
  // The layer reports the hazard as the copy is recorded; captured, so a passing run's log
  // holds no validation error.
  testing::internal::CaptureStderr();
  vk.vkCmdFillBuffer(cmd, a.handle(), a.offset(), 256, 0x3f800000u);
  const VkBufferCopy region{a.offset(), b.offset(), 256};
  vk.vkCmdCopyBuffer(cmd, a.handle(), b.handle(), 1, &region);
  vk.vkEndCommandBuffer(cmd);
  context.submitAndWait(cmd);
  const std::string printed = testing::internal::GetCapturedStderr();
  vk.vkDestroyCommandPool(context.device(), pool, nullptr);
  EXPECT_NE(printed.find("SYNC-HAZARD-READ"), std::string::npos) << printed;
  const size_t after_hazard = context.validationMessages().size();
  EXPECT_GE(after_hazard, 1u);

  vk::Recorder rec(context);
  rec.copy(a, 0, b, 0, 256);
  rec.copy(b, 0, a, 0, 256);
  rec.submit();
  EXPECT_EQ(context.validationMessages().size(), after_hazard);
}

TEST(Context, AdoptsAnExternalDeviceAndDestroysNothingOfTheHost) {
  // The "host app": its own instance and device, validated, so any use of a destroyed
  // handle by the engine afterwards is reported.
  vk::Context host(withValidation());
  vk::ExternalDevice external;
  external.instance = host.instance().handle();
  external.physical_device = host.physicalDevice();
  external.device = host.device();
  external.queue_family = host.queueFamily();
  external.get_instance_proc_addr = vkGetInstanceProcAddr;
  {
    vk::Context engine(external);
    EXPECT_FALSE(engine.ownsDevice());
    EXPECT_EQ(engine.device(), host.device());
    EXPECT_EQ(engine.queue(), host.queue());
    EXPECT_EQ(engine.info().name, host.info().name);
    expectRoundTrip(engine);
    vk::Buffer buffer = engine.allocator().allocate(64);
    vk::Recorder rec(engine);
    rec.fill(buffer, 0x3f800000u);  // 1.0f
    rec.submit();
    float back[16];
    engine.staging().download(buffer, 0, back, sizeof(back));
    for (float x : back) EXPECT_EQ(x, 1.0f);
  }
  // The device, queue and instance still work after the engine's Context is gone.
  expectRoundTrip(host);
  host.waitIdle();
  EXPECT_TRUE(host.validationMessages().empty());
}

TEST(Context, ExternalDeviceIsCheckedBeforeUse) {
  vk::Context host(withValidation());
  vk::ExternalDevice external;
  EXPECT_THROW(vk::Context{external}, Error);  // no handles at all
  external.instance = host.instance().handle();
  external.physical_device = host.physicalDevice();
  external.device = host.device();
  external.get_instance_proc_addr = vkGetInstanceProcAddr;
  external.queue_family = 1000;
  try {
    vk::Context engine(external);
    FAIL() << "queue family 1000 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("queue family 1000"), std::string::npos) << e.what();
  }
  external.queue_family = host.queueFamily();
  external.queue_index = 1000;
  try {
    vk::Context engine(external);
    FAIL() << "queue index 1000 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("queue index 1000"), std::string::npos) << e.what();
  }
  external.queue_index = 0;
  external.concurrent_families = {1000};
  try {
    vk::Context engine(external);
    FAIL() << "concurrent family 1000 was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concurrent family 1000"), std::string::npos) << e.what();
  }
  external.concurrent_families = {host.queueFamily()};  // one family in all: exclusive
  EXPECT_TRUE(vk::Context(external).concurrentFamilies().empty());
  EXPECT_TRUE(host.validationMessages().empty());
}

// A device the "app" creates on the host's physical device with `chain` as its features,
// adopted by an engine told what it enabled; destroyed with the engine.
struct AppDevice {
  VkDevice device = VK_NULL_HANDLE;
  VolkDeviceTable vk{};
  AppDevice(const vk::Context& host, const void* chain) {
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
    queue.queueFamilyIndex = host.queueFamily();
    queue.queueCount = 1;
    queue.pQueuePriorities = &priority;
    info.pNext = chain;
    info.queueCreateInfoCount = 1;
    info.pQueueCreateInfos = &queue;
    EXPECT_EQ(vkCreateDevice(host.physicalDevice(), &info, nullptr, &device), VK_SUCCESS);
    volkLoadDeviceTable(&vk, device);
    info.pQueueCreateInfos = nullptr;
  }
  ~AppDevice() { vk.vkDestroyDevice(device, nullptr); }
  vk::ExternalDevice external(const vk::Context& host) const {
    vk::ExternalDevice e;
    e.instance = host.instance().handle();
    e.physical_device = host.physicalDevice();
    e.device = device;
    e.queue_family = host.queueFamily();
    e.get_instance_proc_addr = vkGetInstanceProcAddr;
    e.enabled_features = vk::enabledFeatures(info);
    return e;
  }
  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
};

// An app that creates its device with timeline semaphores alone: the engine believes no
// optional feature, so a kernel that needs 16-bit storage is refused by name instead of
// running on a device that did not enable it (which the validation layer would report).
// With EngineFeatures' chain the engine gets all the device offers; without timeline
// semaphores it refuses the device.
TEST(Context, AnAdoptedDeviceOffersOnlyWhatItWasCreatedWith) {
  vk::Context host(withValidation());
  VkPhysicalDeviceVulkan12Features timeline{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  timeline.timelineSemaphore = VK_TRUE;
  {
    AppDevice bare(host, &timeline);
    vk::Context engine(bare.external(host));
    EXPECT_FALSE(engine.info().storage_16bit);
    EXPECT_FALSE(engine.info().storage_8bit);
    EXPECT_FALSE(engine.info().fp16);
    EXPECT_FALSE(engine.info().int8);
    EXPECT_FALSE(engine.info().int64);
    try {
      engine.kernels().get("convert/convert.s16",
                           {{"local_size_x", 64u}, {"src_dtype", 1u}, {"dst_dtype", 0u}});
      FAIL() << "a 16-bit kernel was built for a device created without 16-bit storage";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("storageBuffer16BitAccess"), std::string::npos)
          << e.what();
    }
    expectRoundTrip(engine);  // f32 work goes on
  }
  {
    vk::EngineFeatures features(host.instance().handle(), host.physicalDevice(),
                                vkGetInstanceProcAddr);
    // What the device offers (host.info() is lowered under a device profile; the chain is not).
    const vk::DeviceInfo offered = vk::queryDevice(host.physicalDevice(), host.info().index);
    EXPECT_TRUE(features.enabled().timeline_semaphore);
    EXPECT_EQ(features.enabled().storage_16bit, offered.storage_16bit);
    EXPECT_EQ(features.enabled().fp16, offered.fp16);
    EXPECT_EQ(features.enabled().int64, offered.int64);
    AppDevice full(host, features.chain());
    vk::Context engine(full.external(host));
    EXPECT_EQ(engine.info().storage_16bit, host.info().storage_16bit);
    EXPECT_EQ(engine.info().storage_8bit, host.info().storage_8bit);
    EXPECT_EQ(engine.info().int8, host.info().int8);
    expectRoundTrip(engine);
  }
  {
    VkPhysicalDeviceVulkan12Features none{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    AppDevice old(host, &none);
    try {
      vk::Context engine(old.external(host));
      FAIL() << "a device created without timeline semaphores was adopted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("timelineSemaphore"), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(host.validationMessages().empty());
}

}  // namespace
}  // namespace vkgrad::test
