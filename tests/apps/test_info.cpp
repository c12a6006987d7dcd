// vkgrad-info as a user runs it: valid JSON that names the device the engine picks,
// readable text, and clear failures (bad VKGRAD_DEVICE, bad options) without crashes.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "apps/json.h"
#include "apps/run_app.h"
#include "common/vk_test.h"
#include "vk/device_info.h"

namespace vkgrad::test {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class InfoAppTest : public VkTest {};

TEST_F(InfoAppTest, JsonIsValidAndNamesTheDevice) {
  const AppRun run = runApp("info", {"--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Json doc;
  ASSERT_NO_THROW(doc = JsonParser::parse(run.out)) << run.out;
  ASSERT_EQ(doc.kind, Json::Object);
  const Json& devices = doc["devices"];
  ASSERT_EQ(devices.kind, Json::Array);
  EXPECT_EQ(devices.items.size(), vk::listDevices().size());
  // The device it marks is the one a Context picks with the same environment.
  const Json& chosen = doc["default_device"];
  const Json& selected = devices.items.at(size_t(chosen["index"].number));
  EXPECT_EQ(selected["name"].text, ctx().info().name);
  EXPECT_EQ(selected["index"].number, ctx().info().index);
  EXPECT_TRUE(selected["default"].boolean);
  EXPECT_EQ(selected["subgroup"]["size"].number, ctx().info().subgroup_size);
  EXPECT_EQ(selected["max_storage_buffer_range_bytes"].number,
            double(ctx().info().max_storage_buffer_range));
  EXPECT_EQ(selected["type"].text, vk::deviceTypeName(ctx().info().type));
  EXPECT_EQ(selected["compute_queue"]["family"].number, ctx().info().compute_family);
  int defaults = 0;
  for (const Json& d : devices.items) {
    for (const char* key : {"name", "type", "driver_name", "driver_info", "api_version"})
      EXPECT_EQ(d[key].kind, Json::String) << key;
    for (const char* key : {"index", "vendor_id", "device_id", "max_shared_memory_bytes",
                            "max_workgroup_invocations", "max_storage_buffer_range_bytes",
                            "max_texel_buffer_elements", "max_push_constants_bytes"})
      EXPECT_EQ(d[key].kind, Json::Number) << key;
    for (const char* key : {"compute", "shuffle", "arithmetic"})
      EXPECT_EQ(d["subgroup"][key].kind, Json::Bool) << key;
    for (const char* key : {"fp16", "int8", "fp64", "int64", "storage_16bit", "storage_8bit"})
      EXPECT_EQ(d["features"][key].kind, Json::Bool) << key;
    EXPECT_EQ(d["timestamps"]["supported"].kind, Json::Bool);
    EXPECT_EQ(d["compute_queue"]["present"].kind, Json::Bool);
    EXPECT_EQ(d["max_workgroup_size"].items.size(), 3u);
    ASSERT_FALSE(d["memory_heaps"].items.empty());
    EXPECT_EQ(d["memory_heaps"].items[0]["bytes"].kind, Json::Number);
    EXPECT_EQ(d["memory_heaps"].items[0]["device_local"].kind, Json::Bool);
    defaults += d["default"].boolean;
  }
  EXPECT_EQ(defaults, 1);
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
    const Json chosen = JsonParser::parse(run.out)["default_device"];
    EXPECT_EQ(chosen["index"].number, info.index);
    EXPECT_EQ(chosen["source"].text, "--device");
    EXPECT_EQ(chosen["selector"].text, index);
  }
  const AppRun by_env = runApp("info", {"--json"}, {{"VKGRAD_DEVICE", info.name}});
  ASSERT_EQ(by_env.exit_code, 0) << by_env.err;
  const Json chosen = JsonParser::parse(by_env.out)["default_device"];
  EXPECT_EQ(chosen["index"].number, info.index);
  EXPECT_EQ(chosen["source"].text, "VKGRAD_DEVICE");
  EXPECT_EQ(chosen["selector"].text, info.name);
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

}  // namespace
}  // namespace vkgrad::test
