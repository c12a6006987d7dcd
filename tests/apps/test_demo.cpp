// vkgrad-demo as a user runs it: every check passes with validation on, and bad
// devices or options fail cleanly.
#include <string>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "vkgrad/vk/device_info.h"

namespace vkgrad::test {
namespace {

TEST(DemoApp, EveryCheckPassesWithValidationOn) {
  const AppRun run = runApp("demo", {"--validation"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const char* op : {"\nmatmul ", "\nsoftmax ", "\nlayernorm "})
    EXPECT_TRUE(contains(run.out, op)) << "no line for" << op << "\n" << run.out;
  EXPECT_FALSE(contains(run.out, "FAIL")) << run.out;
  EXPECT_TRUE(contains(run.out, "validation messages: 0")) << run.out;
  EXPECT_TRUE(contains(run.out, "matmul variant: ")) << run.out;
  EXPECT_TRUE(contains(run.out, "all 3 checks passed")) << run.out;
  EXPECT_FALSE(contains(run.err, "validation")) << run.err;
}

TEST(DemoApp, UnknownDeviceFailsListingTheDevices) {
  for (const auto& [args, env] :
       {std::pair<std::vector<std::string>, std::string>{{}, "no-such-device"},
        std::pair<std::vector<std::string>, std::string>{{"--device", "no-such-device"}, ""}}) {
    const AppRun run = runApp("demo", args, {{"VKGRAD_DEVICE", env}});
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    EXPECT_TRUE(contains(run.err, "'no-such-device' matches no Vulkan device")) << run.err;
    for (const vk::DeviceInfo& d : vk::listDevices())
      EXPECT_TRUE(contains(run.err, std::to_string(d.index) + ": " + d.name)) << run.err;
  }
}

TEST(DemoApp, HelpExitsZeroAndBadOptionsExitTwo) {
  const AppRun help = runApp("demo", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "usage: vkgrad-demo")) << help.out;
  EXPECT_TRUE(contains(help.out, "--device")) << help.out;
  EXPECT_TRUE(contains(help.out, "--validation")) << help.out;
  EXPECT_EQ(runApp("demo", {"--no-such-option"}).exit_code, 2);
  EXPECT_EQ(runApp("demo", {"--seed", "minus-one"}).exit_code, 2);
  EXPECT_EQ(runApp("demo", {"--device"}).exit_code, 2);  // needs a value
}

}  // namespace
}  // namespace vkgrad::test
