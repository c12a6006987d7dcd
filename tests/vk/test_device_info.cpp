// Device selection runs on made-up device lists, so every rule is checked whatever
// hardware the test machine has; the query itself runs on the real device.
#include "vkgrad/vk/device_info.h"

#include <algorithm>
#include <string>

#include "common/vk_test.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

using vk::DeviceInfo;
using vk::DeviceType;

DeviceInfo fake(uint32_t index, std::string name, DeviceType type) {
  DeviceInfo d;
  d.index = index;
  d.name = std::move(name);
  d.type = type;
  d.api_version = VK_API_VERSION_1_3;
  d.compute_family = 0;
  return d;
}

// Listed in enumeration order with the CPU driver first, as some loaders do.
std::vector<DeviceInfo> machine() {
  return {fake(0, "llvmpipe (LLVM 15.0.6, 256 bits)", DeviceType::Cpu),
          fake(1, "Intel(R) UHD Graphics 620", DeviceType::Integrated),
          fake(2, "NVIDIA GeForce RTX 3060", DeviceType::Discrete)};
}

std::string selectError(const std::vector<DeviceInfo>& devices, std::string_view selector) {
  try {
    vk::selectDevice(devices, selector, "VKGRAD_DEVICE");
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "selector '" << selector << "' was accepted";
  return {};
}

TEST(SelectDevice, ByIndex) {
  const auto devices = machine();
  EXPECT_EQ(vk::selectDevice(devices, "0", "test"), 0u);
  EXPECT_EQ(vk::selectDevice(devices, "1", "test"), 1u);
  EXPECT_EQ(vk::selectDevice(devices, "2", "test"), 2u);
  EXPECT_NE(selectError(devices, "3").find("matches no Vulkan device"), std::string::npos);
}

TEST(SelectDevice, ByNameSubstringIgnoringCase) {
  const auto devices = machine();
  EXPECT_EQ(vk::selectDevice(devices, "llvmpipe", "test"), 0u);
  EXPECT_EQ(vk::selectDevice(devices, "LLVMPIPE", "test"), 0u);
  EXPECT_EQ(vk::selectDevice(devices, "intel", "test"), 1u);
  EXPECT_EQ(vk::selectDevice(devices, "rtx 30", "test"), 2u);
  EXPECT_EQ(vk::selectDevice(devices, "GeForce", "test"), 2u);
}

TEST(SelectDevice, PrefersDiscreteThenIntegratedThenAny) {
  auto devices = machine();
  EXPECT_EQ(vk::selectDevice(devices, "", "test"), 2u);
  devices.pop_back();
  EXPECT_EQ(vk::selectDevice(devices, "", "test"), 1u);
  devices.pop_back();
  EXPECT_EQ(vk::selectDevice(devices, "", "test"), 0u);
  // Neither discrete nor integrated: the first usable one.
  devices = {fake(0, "virtio", DeviceType::Virtual), fake(1, "llvmpipe", DeviceType::Cpu)};
  EXPECT_EQ(vk::selectDevice(devices, "", "test"), 0u);
}

TEST(SelectDevice, AutomaticSkipsDevicesWithoutVulkan12OrCompute) {
  auto devices = machine();
  devices[2].api_version = VK_API_VERSION_1_1;
  devices[1].compute_family = UINT32_MAX;
  EXPECT_EQ(vk::selectDevice(devices, "", "test"), 0u);
  // Asked for by name, an unusable device is an error that says why.
  const std::string message = selectError(devices, "nvidia");
  EXPECT_NE(message.find("lacks Vulkan 1.2 or a compute queue"), std::string::npos) << message;
  devices[0].api_version = VK_API_VERSION_1_0;
  const std::string none = selectError(devices, "");
  EXPECT_NE(none.find("no Vulkan device supports Vulkan 1.2"), std::string::npos) << none;
}

TEST(SelectDevice, NoMatchNamesTheSelectorAndListsTheDevices) {
  const std::string message = selectError(machine(), "no-such-device");
  EXPECT_NE(message.find("VKGRAD_DEVICE='no-such-device'"), std::string::npos) << message;
  for (const DeviceInfo& d : machine())
    EXPECT_NE(message.find(std::to_string(d.index) + ": " + d.name), std::string::npos) << message;
}

TEST(SelectDevice, EmptyListIsAClearError) {
  const std::string message = selectError({}, "");
  EXPECT_NE(message.find("no Vulkan device found"), std::string::npos) << message;
  EXPECT_NE(message.find("mesa-vulkan-drivers"), std::string::npos) << message;
}

TEST(DeviceStrings, DescribeAndVersion) {
  const std::string text = vk::describeDevices(machine());
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  for (const char* line :
       {"0: llvmpipe (LLVM 15.0.6, 256 bits) [cpu]\n",
        "1: Intel(R) UHD Graphics 620 [integrated]\n", "2: NVIDIA GeForce RTX 3060 [discrete]\n"})
    EXPECT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(vk::versionString(VK_MAKE_API_VERSION(0, 1, 3, 230)), "1.3.230");
  EXPECT_STREQ(vk::deviceTypeName(DeviceType::Other), "other");
}

class DeviceQueryTest : public VkTest {};

// The limits the rest of the engine relies on, as queried from the device in use.
TEST_F(DeviceQueryTest, ContextDeviceIsListedWithSaneLimits) {
  const DeviceInfo& info = ctx().info();
  const auto devices = vk::listDevices();
  ASSERT_LT(info.index, devices.size());
  EXPECT_EQ(devices[info.index].name, info.name);
  EXPECT_GE(info.api_version, VK_API_VERSION_1_2);
  EXPECT_NE(info.compute_family, UINT32_MAX);
  EXPECT_GE(info.max_push_constants, 128u);
  EXPECT_GE(info.max_shared_memory, 16384u);  // the Vulkan minimum
  EXPECT_GE(info.max_workgroup_invocations, 128u);
  EXPECT_GE(info.max_storage_buffer_range, uint64_t(1) << 27);
  EXPECT_GT(info.subgroup_size, 0u);
  EXPECT_EQ(info.subgroup_size & (info.subgroup_size - 1), 0u) << "not a power of two";
  EXPECT_FALSE(info.heaps.empty());
  EXPECT_GT(info.min_storage_offset_alignment, 0u);
  EXPECT_FALSE(info.name.empty());
}

}  // namespace
}  // namespace vkgrad::test
