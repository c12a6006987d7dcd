// --device, --validation and --memory-limit (apps/common/device_options.h) as every program
// takes them: the same help, a run on the device the option names with the validation layer
// clean, and an unknown device failing with a message that names the option and lists the
// devices.
#include "common/device_options.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "apps/run_app.h"
#include "common/process.h"
#include "common/vk_test.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/vk/device_info.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

// The help text of one option, as Cli::usage prints it: the "  --name" line and the next.
std::string helpOf(const std::string& usage, const std::string& name) {
  const size_t at = usage.find("\n  --" + name);
  if (at == std::string::npos) return "";
  const size_t end = usage.find('\n', usage.find('\n', at + 1) + 1);
  return usage.substr(at, end - at);
}

// The last line of out that parses as a JSON object.
class DeviceOptionsTest : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    dir_ = fs::temp_directory_path() / ("vkgrad_device_options_" + std::to_string(processId()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream text(dir_ / "text.txt");
    for (int i = 0; i < 10; ++i) text << "a small text to train on.\n";
  }
  void TearDown() override {
    fs::remove_all(dir_);
    VkTest::TearDown();
  }

  // One short run of each program (and each vkgrad-gpt and vkgrad-vit command), with `device`
  // appended.
  std::vector<std::pair<std::string, std::vector<std::string>>> runs() const {
    const std::string data = (dir_ / "text.txt").string(), out = (dir_ / "ckpt").string();
    const std::string vit_out = (dir_ / "vit").string();
    return {
        {"info", {"--json"}},
        {"demo", {"--seed", "1"}},
        {"bench", {"copy", "--n", "64", "--iters", "1", "--warmup", "0", "--json"}},
#ifdef VKGRAD_WITH_DRAWING_APPS  // built where cairo is (tests/CMakeLists.txt)
        {"gpt",
         {"train", "--data", data, "--out", out, "--layers", "1", "--heads", "1", "--width", "8",
          "--context", "8", "--batch", "2", "--steps", "1", "--json"}},
        {"gpt", {"sample", "--checkpoint", out, "--prompt", "a", "--tokens", "2"}},
        {"vit",
         {"train", "--out", vit_out, "--limit", "64", "--epochs", "1", "--batch", "32", "--width",
          "8", "--layers", "1", "--heads", "1", "--json"}},
        {"vit", {"eval", "--checkpoint", vit_out, "--json"}},
#endif
    };
  }

  fs::path dir_;
};

TEST(DeviceOptions, EveryProgramDeclaresBothWithTheSameHelp) {
  apps::Cli cli("vkgrad-test", "");
  apps::declareDeviceOptions(cli);
  const std::string usage = cli.usage();
  const std::vector<std::pair<std::string, std::vector<std::string>>> helps = {
      {"info", {"--help"}},         {"demo", {"--help"}},           {"bench", {"copy", "--help"}},
#ifdef VKGRAD_WITH_DRAWING_APPS
      {"gpt", {"train", "--help"}}, {"gpt", {"sample", "--help"}},  {"vit", {"train", "--help"}},
      {"vit", {"eval", "--help"}},  {"vit", {"predict", "--help"}},
#endif
  };
  for (const auto& [program, args] : helps) {
    const AppRun help = runApp(program, args);
    EXPECT_EQ(help.exit_code, 0) << program << help.err;
    for (const char* name : {"device", "validation", "memory-limit"}) {
      EXPECT_FALSE(helpOf(usage, name).empty()) << name;
      EXPECT_EQ(helpOf(help.out, name), helpOf(usage, name)) << program << " --" << name;
    }
  }
}

TEST_F(DeviceOptionsTest, EveryProgramRunsOnTheDeviceItNames) {
  const vk::DeviceInfo& info = ctx().info();
  for (auto [program, args] : runs()) {
    args.insert(args.end(), {"--device", std::to_string(info.index), "--validation"});
    SCOPED_TRACE("vkgrad-" + program + " " + args[0]);
    // VKGRAD_DEVICE must lose to --device.
    const AppRun run = runApp(program, args, {{"VKGRAD_DEVICE", "no-such-device"}});
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_FALSE(contains(run.err, "validation layer reported")) << run.err;
    if (program == "info") {
      const graph::Json chosen = graph::parseJson(run.out, "info").at("default_device");
      EXPECT_EQ(chosen.at("index"), info.index);
      EXPECT_EQ(chosen.at("source"), "--device");
    } else if (program == "demo") {
      EXPECT_TRUE(contains(run.out, "device " + std::to_string(info.index) + ": " + info.name))
          << run.out;
      EXPECT_TRUE(contains(run.out, "validation messages: 0")) << run.out;
    } else if (args[0] != "sample") {
      EXPECT_EQ(lastJsonLine(run.out).at("device"), info.name) << run.out;
    }
  }
}

TEST_F(DeviceOptionsTest, EveryProgramRejectsAnUnknownDeviceNamingTheOption) {
  // sample and eval need a checkpoint to get as far as the device.
  const auto all = runs();
#ifdef VKGRAD_WITH_DRAWING_APPS
  ASSERT_EQ(runApp(all[3].first, all[3].second).exit_code, 0);
  ASSERT_EQ(runApp(all[5].first, all[5].second).exit_code, 0);
#endif
  for (auto [program, args] : all) {
    args.insert(args.end(), {"--device", "no-such-device"});
    SCOPED_TRACE("vkgrad-" + program + " " + args[0]);
    const AppRun run = runApp(program, args, {{"VKGRAD_DEVICE", ""}});
    EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
    EXPECT_TRUE(contains(run.err, "vkgrad-" + program)) << run.err;
    EXPECT_TRUE(contains(run.err, "--device='no-such-device' matches no Vulkan device")) << run.err;
    for (const vk::DeviceInfo& d : vk::listDevices())
      EXPECT_TRUE(contains(run.err, std::to_string(d.index) + ": " + d.name)) << run.err;
  }
  // A missing value is a usage error.
  EXPECT_EQ(runApp("bench", {"copy", "--device"}).exit_code, 2);
}

}  // namespace
}  // namespace vkgrad::test
