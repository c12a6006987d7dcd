// vkgrad-info as a user runs it: valid JSON that names the device the engine picks,
// readable text, and clear failures (bad VKGRAD_DEVICE, bad options) without crashes.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "apps/run_app.h"
#include "common/vk_test.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/vk/device_info.h"

namespace vkgrad::test {
namespace {

class InfoAppTest : public VkTest {};

TEST_F(InfoAppTest, JsonIsValidAndNamesTheDevice) {
  const AppRun run = runApp("info", {"--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  graph::Json doc;
  ASSERT_NO_THROW(doc = graph::parseJson(run.out, "vkgrad-info --json")) << run.out;
  ASSERT_TRUE(doc.is_object());
  const graph::Json& devices = doc.at("devices");
  ASSERT_TRUE(devices.is_array());
  EXPECT_EQ(devices.size(), vk::listDevices().size());
  // The device it marks is the one a Context picks with the same environment.
  const graph::Json& chosen = doc.at("default_device");
  const graph::Json& selected = devices.at(chosen.at("index").get<size_t>());
  EXPECT_EQ(selected.at("name"), ctx().info().name);
  EXPECT_EQ(selected.at("index"), ctx().info().index);
  EXPECT_EQ(selected.at("default"), true);
  EXPECT_EQ(selected.at("subgroup").at("size"), ctx().info().subgroup_size);
  EXPECT_EQ(selected.at("max_storage_buffer_range_bytes"), ctx().info().max_storage_buffer_range);
  EXPECT_EQ(selected.at("type"), vk::deviceTypeName(ctx().info().type));
  EXPECT_EQ(selected.at("compute_queue").at("family"), ctx().info().compute_family);
  int defaults = 0;
  for (const graph::Json& d : devices) {
    for (const char* key : {"name", "type", "driver_name", "driver_info", "api_version"})
      EXPECT_TRUE(d.at(key).is_string()) << key;
    for (const char* key : {"index", "vendor_id", "device_id", "max_shared_memory_bytes",
                            "max_workgroup_invocations", "max_storage_buffer_range_bytes",
                            "max_texel_buffer_elements", "max_push_constants_bytes"})
      EXPECT_TRUE(d.at(key).is_number_unsigned()) << key;
    for (const char* key : {"compute", "shuffle", "arithmetic"})
      EXPECT_TRUE(d.at("subgroup").at(key).is_boolean()) << key;
    for (const char* key : {"fp16", "int8", "fp64", "int64", "storage_16bit", "storage_8bit"})
      EXPECT_TRUE(d.at("features").at(key).is_boolean()) << key;
    EXPECT_TRUE(d.at("timestamps").at("supported").is_boolean());
    EXPECT_TRUE(d.at("compute_queue").at("present").is_boolean());
    const graph::Json& families = d.at("queue_families");
    ASSERT_FALSE(families.empty());
    for (const graph::Json& f : families) {
      for (const char* key : {"graphics", "compute", "transfer"})
        EXPECT_TRUE(f.at(key).is_boolean()) << key;
      EXPECT_GE(f.at("queues").get<uint32_t>(), 1u);
    }
    if (d.at("compute_queue").at("present").get<bool>()) {
      EXPECT_TRUE(families.at(d.at("compute_queue").at("family").get<size_t>()).at("compute"));
    }
    EXPECT_EQ(d.at("max_workgroup_size").size(), 3u);
    ASSERT_FALSE(d.at("memory_heaps").empty());
    EXPECT_TRUE(d.at("memory_heaps").at(0).at("bytes").is_number_unsigned());
    EXPECT_TRUE(d.at("memory_heaps").at(0).at("device_local").is_boolean());
    defaults += d.at("default").get<bool>();
  }
  EXPECT_EQ(defaults, 1);
}

// --device-profile (or VKGRAD_DEVICE_PROFILE) prints what a Context under that profile
// believes: the README's device table is checked against these lines.
TEST_F(InfoAppTest, DeviceProfilePrintsWhatTheEngineBelieves) {
  for (const char* profile : {"vulkan12-minimum", "mobile"}) {
    SCOPED_TRACE(profile);
    vk::ContextOptions options;
    options.validation = true;
    options.profile = profile;
    const vk::Context context(options);
    const vk::DeviceInfo& info = context.info();
    const AppRun by_option = runApp("info", {"--json", "--device-profile", profile});
    const AppRun by_variable = runApp("info", {"--json"}, {{"VKGRAD_DEVICE_PROFILE", profile}});
    for (const AppRun* run : {&by_option, &by_variable}) {
      ASSERT_EQ(run->exit_code, 0) << run->err;
      const graph::Json doc = graph::parseJson(run->out, "vkgrad-info --json");
      const graph::Json& d =
          doc.at("devices").at(doc.at("default_device").at("index").get<size_t>());
      EXPECT_EQ(d.at("device_profile"), profile);
      EXPECT_EQ(d.at("max_workgroup_invocations"), info.max_workgroup_invocations);
      EXPECT_EQ(d.at("max_shared_memory_bytes"), info.max_shared_memory);
      EXPECT_EQ(d.at("max_per_stage_descriptors").at("storage_buffers"), info.max_storage_buffers);
      EXPECT_EQ(d.at("features").at("storage_16bit"), false);
      EXPECT_EQ(d.at("features").at("fp64"), false);
      EXPECT_EQ(d.at("subgroup").at("arithmetic"), info.subgroup_arithmetic);
    }
    const AppRun text = runApp("info", {"--device-profile", profile});
    EXPECT_TRUE(contains(text.out, std::string("device profile   ") + profile)) << text.out;
  }
  const AppRun bad = runApp("info", {"--device-profile", "tiny"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "--device-profile='tiny' is not a device profile")) << bad.err;
}

TEST_F(InfoAppTest, TextMarksTheDefaultDevice) {
  const AppRun run = runApp("info", {});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const vk::DeviceInfo& info = ctx().info();
  EXPECT_TRUE(contains(run.out, "* " + std::to_string(info.index) + ": " + info.name)) << run.out;
  EXPECT_TRUE(contains(run.out, "subgroup")) << run.out;
  EXPECT_TRUE(run.err.empty()) << run.err;
}

TEST_F(InfoAppTest, DeviceOptionAndVariableSetTheMark) {
  const vk::DeviceInfo& info = ctx().info();
  const std::string index = std::to_string(info.index);
  // --device wins over VKGRAD_DEVICE.
  for (const std::string& env : {info.name, std::string("no-such-device"), std::string()}) {
    const AppRun run = runApp("info", {"--json", "--device", index}, {{"VKGRAD_DEVICE", env}});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const graph::Json chosen = graph::parseJson(run.out, "info").at("default_device");
    EXPECT_EQ(chosen.at("index"), info.index);
    EXPECT_EQ(chosen.at("source"), "--device");
    EXPECT_EQ(chosen.at("selector"), index);
  }
  const AppRun by_env = runApp("info", {"--json"}, {{"VKGRAD_DEVICE", info.name}});
  ASSERT_EQ(by_env.exit_code, 0) << by_env.err;
  const graph::Json chosen = graph::parseJson(by_env.out, "info").at("default_device");
  EXPECT_EQ(chosen.at("index"), info.index);
  EXPECT_EQ(chosen.at("source"), "VKGRAD_DEVICE");
  EXPECT_EQ(chosen.at("selector"), info.name);
}

TEST(InfoApp, UnknownDeviceFailsListingTheDevices) {
  for (const auto& [args, env] :
       {std::pair<std::vector<std::string>, std::string>{{}, "no-such-device"},
        std::pair<std::vector<std::string>, std::string>{{"--json", "--device", "no-such-device"},
                                                         ""}}) {
    const AppRun run = runApp("info", args, {{"VKGRAD_DEVICE", env}});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_TRUE(contains(run.err, "'no-such-device' matches no Vulkan device")) << run.err;
    for (const vk::DeviceInfo& d : vk::listDevices())
      EXPECT_TRUE(contains(run.err, std::to_string(d.index) + ": " + d.name)) << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
}

// A blank selector used to match any device whose name holds a space.
TEST(InfoApp, BlankDeviceIsAnError) {
  const AppRun run = runApp("info", {"--device", " "});
  EXPECT_EQ(run.exit_code, 1) << run.out;
  EXPECT_TRUE(contains(run.err, "--device=' ' is blank")) << run.err;
}

TEST(InfoApp, HelpExitsZeroAndUnknownOptionsExitTwo) {
  const AppRun help = runApp("info", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "usage: vkgrad-info")) << help.out;
  EXPECT_TRUE(contains(help.out, "--json")) << help.out;
  const AppRun bad = runApp("info", {"--no-such-option"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "unknown option '--no-such-option'")) << bad.err;
  const AppRun stray = runApp("info", {"stray"});
  EXPECT_EQ(stray.exit_code, 2);
}

// Under the test layer that adds a compute-only family (tests/layers), the families list shows
// it and the engine's own queue moves to it, as on a GPU with an async compute family.
TEST_F(InfoAppTest, ListsQueueFamiliesAndPrefersAComputeOnlyOne) {
  const AppRun plain = runApp("info", {"--json"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const AppRun split = runApp("info", {"--json"},
                              {{"VK_ADD_LAYER_PATH", VKGRAD_TEST_LAYER_DIR},
                               {"VK_INSTANCE_LAYERS", "VK_LAYER_VKGRAD_split_queue_family"}});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  const graph::Json before =
      graph::parseJson(plain.out, "vkgrad-info --json").at("devices").at(ctx().info().index);
  const graph::Json after = graph::parseJson(split.out, "vkgrad-info --json (split layer)")
                                .at("devices")
                                .at(ctx().info().index);
  const size_t count = before.at("queue_families").size();
  ASSERT_EQ(after.at("queue_families").size(), count + 1);
  const graph::Json& added = after.at("queue_families").at(count);
  EXPECT_TRUE(added.at("compute"));
  EXPECT_FALSE(added.at("graphics"));
  EXPECT_EQ(after.at("compute_queue").at("compute_only"), true);
  const AppRun text = runApp("info", {},
                             {{"VK_ADD_LAYER_PATH", VKGRAD_TEST_LAYER_DIR},
                              {"VK_INSTANCE_LAYERS", "VK_LAYER_VKGRAD_split_queue_family"}});
  EXPECT_TRUE(contains(text.out, std::to_string(count) + ": compute, transfer, 1 queue"))
      << text.out;
}

}  // namespace
}  // namespace vkgrad::test
