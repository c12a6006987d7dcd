// vkgrad-play as a user runs it without a display: under Xvfb (xvfb-run), with validation and
// synchronisation validation on, so exit status 0 also means the layer said nothing about the
// semaphores between the engine's compute and the app's drawing. A screenshot after a few
// frames (the barely trained model) and one after many (same seed) must both be real
// pictures of the window's size, and training must have changed the picture.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <stb_image.h>

#include "apps/run_app.h"
#include "common/process.h"
#include "common/temp_dir.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

constexpr int kWidth = 320, kHeight = 240;

// xvfb-run's path on $PATH, or empty.
std::string findXvfbRun() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');)
    if (!dir.empty() && isExecutable(dir + "/xvfb-run")) return dir + "/xvfb-run";
  return "";
}

// `xvfb-run -a -f AUTH vkgrad-play args...` with a 24-bit screen. The X authority file lives in
// the test's own folder: without -f, xvfb-run makes a temporary folder of its own and exits 5
// ("problem while cleaning up temporary directory"), hiding the app's status, when removing
// it races the X server's shutdown, which the sanitizer suite met once under load.
AppRun runPlayUnderXvfb(const std::string& xvfb_run, const fs::path& auth,
                        const std::vector<std::string>& args,
                        const std::vector<std::pair<std::string, std::string>>& env = {}) {
  std::vector<std::string> argv{"-a",           "-f", auth.string(), "-s", "-screen 0 640x480x24",
                                appPath("play")};
  argv.insert(argv.end(), args.begin(), args.end());
  return runProgram(xvfb_run, argv, env);
}

struct Picture {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
};

Picture readPng(const fs::path& path) {
  Picture p;
  int channels = 0;
  unsigned char* data = stbi_load(path.string().c_str(), &p.width, &p.height, &channels, 3);
  if (!data) return p;
  p.rgb.assign(data, data + size_t(p.width) * size_t(p.height) * 3);
  stbi_image_free(data);
  return p;
}

size_t distinctColours(const Picture& p) {
  std::set<uint32_t> colours;
  for (size_t i = 0; i + 2 < p.rgb.size(); i += 3)
    colours.insert(uint32_t(p.rgb[i]) << 16 | uint32_t(p.rgb[i + 1]) << 8 | p.rgb[i + 2]);
  return colours.size();
}

// The share of pixels whose colour moved by more than 24 (of 255) in some channel: well
// above rounding and the points' anti-aliasing, which are the same in both pictures.
double changedShare(const Picture& a, const Picture& b) {
  size_t changed = 0;
  for (size_t i = 0; i + 2 < a.rgb.size(); i += 3) {
    int most = 0;
    for (size_t c = 0; c < 3; ++c)
      most = std::max(most, std::abs(int(a.rgb[i + c]) - int(b.rgb[i + c])));
    changed += most > 24;
  }
  return double(changed) / double(a.rgb.size() / 3);
}

class PlayApp : public TempDirTest {
 protected:
};

TEST_F(PlayApp, TrainingChangesThePictureWithValidationOn) {
  const std::string xvfb_run = findXvfbRun();
  ASSERT_FALSE(xvfb_run.empty())
      << "xvfb-run is not on PATH; this test runs vkgrad-play on a virtual display "
         "(Debian: apt-get install xvfb xauth)";
  Picture pictures[2];
  const int frames[2] = {3, 60};
  for (int i = 0; i < 2; ++i) {
    const fs::path png = dir_ / ("frame" + std::to_string(frames[i]) + ".png");
    const AppRun run =
        runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority",
                         {"--validation", "--frames", std::to_string(frames[i]), "--screenshot",
                          png.string(), "--width", std::to_string(kWidth), "--height",
                          std::to_string(kHeight), "--grid", "64", "--seed", "7"});
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_FALSE(contains(run.err, "validation")) << run.err;
    EXPECT_TRUE(contains(run.out, std::to_string(frames[i]) + " frames")) << run.out;
    ASSERT_TRUE(fs::exists(png)) << run.out << run.err;
    pictures[i] = readPng(png);
    EXPECT_EQ(pictures[i].width, kWidth) << png;
    EXPECT_EQ(pictures[i].height, kHeight) << png;
    // Regions shaded by probability, points, the loss panel: 5,500 to 7,000 colours at this
    // size (measured), where a blank or single-colour frame has one or two.
    EXPECT_GT(distinctColours(pictures[i]), 1000u) << png;
  }
  ASSERT_EQ(pictures[0].rgb.size(), pictures[1].rgb.size());
  // Measured: 41 % of the pixels change between frame 3 and frame 60 at seed 7.
  EXPECT_GT(changedShare(pictures[0], pictures[1]), 0.1)
      << "57 more training steps should move the decision regions visibly";
}

// --slice-ms: the training step and the inference go in pieces, one per frame, under
// synchronisation validation; the summary says how many pieces and training still moves on.
TEST_F(PlayApp, SlicedStepsSpreadOverFramesWithValidationOn) {
  const std::string xvfb_run = findXvfbRun();
  ASSERT_FALSE(xvfb_run.empty()) << "xvfb-run is not on PATH (Debian: xvfb xauth)";
  const AppRun run = runPlayUnderXvfb(
      xvfb_run, dir_ / "Xauthority",
      {"--validation", "--frames", "80", "--hidden", "96", "--grid", "32", "--slice-ms", "0.5",
       "--width", std::to_string(kWidth), "--height", std::to_string(kHeight)});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_FALSE(contains(run.err, "validation")) << run.err;
  EXPECT_TRUE(contains(run.out, "a training step in ")) << run.out;
  // Pieces of 0.5 ms: several per step here (a step takes a few ms on lavapipe), so 80
  // frames finish fewer than 80 steps but more than none.
  EXPECT_TRUE(contains(run.out, "80 frames, ")) << run.out;
  EXPECT_FALSE(contains(run.out, "80 frames, 0 steps")) << run.out;
  EXPECT_FALSE(contains(run.out, "a training step in 1 pieces")) << run.out;
}

// --compute-queue separate on a device with one queue (lavapipe) says so and runs on the
// graphics queue, validated as before.
TEST_F(PlayApp, ASeparateComputeQueueFallsBackWhereTheDeviceHasOneQueue) {
  const std::string xvfb_run = findXvfbRun();
  ASSERT_FALSE(xvfb_run.empty()) << "xvfb-run is not on PATH (Debian: xvfb xauth)";
  const AppRun probe =
      runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority",
                       {"--validation", "--frames", "20", "--compute-queue", "separate", "--width",
                        std::to_string(kWidth), "--height", std::to_string(kHeight)});
  ASSERT_EQ(probe.exit_code, 0) << probe.out << probe.err;
  EXPECT_FALSE(contains(probe.err, "validation")) << probe.err;
  // lavapipe: one family with one queue; a GPU's separate queue is the other test's case.
  if (contains(probe.out, "has one queue that computes"))
    EXPECT_TRUE(contains(probe.out, "falls back to the graphics queue")) << probe.out;
  else
    EXPECT_TRUE(contains(probe.out, "the engine computes on")) << probe.out;
  EXPECT_TRUE(contains(probe.out, "20 frames")) << probe.out;
}

// The validation layer's directory (VK_LAYER_PATH's, else a standard one), for loading it above
// the test layer (the loader orders layers named in VK_INSTANCE_LAYERS by where their manifests
// were found).
std::string validationLayerDir() {
  const char* path = std::getenv("VK_LAYER_PATH");
  std::stringstream listed(path ? path : "");
  for (std::string dir; std::getline(listed, dir, ':');)
    if (!dir.empty() && fs::exists(fs::path(dir) / "VkLayer_khronos_validation.json")) return dir;
  for (const char* dir :
       {"/usr/share/vulkan/explicit_layer.d", "/usr/local/share/vulkan/explicit_layer.d",
        "/etc/vulkan/explicit_layer.d"})
    if (fs::exists(fs::path(dir) / "VkLayer_khronos_validation.json")) return dir;
  return "";
}

// With the test layer's compute-only family (tests/layers) below the validation layer, the
// engine computes on that family (or, in the layer's second mode, on a second queue of the
// graphics family) and every new inference moves to the frames' family by a
// release and an acquire (exclusive), or sits in buffers both share (concurrent). The layer is
// loaded from the environment, so its default log reports any error on stdout: none may
// appear (a run without the engine's release reports one per inference:
// UNASSIGNED-VkBufferMemoryBarrier-buffer-00004, seen when this test was written).
TEST_F(PlayApp, TheEngineOnACompanionComputeFamilyHandsItsResultsOver) {
  const std::string xvfb_run = findXvfbRun();
  ASSERT_FALSE(xvfb_run.empty()) << "xvfb-run is not on PATH (Debian: xvfb xauth)";
  const std::string validation_dir = validationLayerDir();
  ASSERT_FALSE(validation_dir.empty()) << "VkLayer_khronos_validation.json not found";
  const std::vector<std::pair<std::string, std::string>> env{
      {"VK_LAYER_PATH", validation_dir + ":" + VKGRAD_TEST_LAYER_DIR},
      {"VK_INSTANCE_LAYERS", "VK_LAYER_KHRONOS_validation:VK_LAYER_VKGRAD_split_queue_family"}};
  for (const char* sharing : {"exclusive", "concurrent"}) {
    const fs::path png = dir_ / (std::string(sharing) + ".png");
    const AppRun run =
        runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority",
                         {"--frames", "40", "--compute-queue", "separate", "--sharing", sharing,
                          "--screenshot", png.string(), "--width", std::to_string(kWidth),
                          "--height", std::to_string(kHeight), "--grid", "64", "--seed", "7"},
                         env);
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_TRUE(contains(run.out, "(compute-only)")) << run.out;
    EXPECT_TRUE(contains(
        run.out, std::string(sharing) == "exclusive" ? "ownership transfers" : "(concurrent)"))
        << run.out;
    EXPECT_FALSE(contains(run.out + run.err, "Validation Error")) << run.out << run.err;
    EXPECT_TRUE(contains(run.out, "40 frames")) << run.out;
    const Picture picture = readPng(png);
    EXPECT_EQ(picture.width, kWidth) << png;
    EXPECT_GT(distinctColours(picture), 1000u) << png;  // regions, points and panel were drawn
  }
  // The layer's second mode: no other family, a second queue in the graphics family.
  std::vector<std::pair<std::string, std::string>> queues_env = env;
  queues_env.emplace_back("VKGRAD_SPLIT_QUEUE_FAMILY", "queues");
  const AppRun second =
      runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority",
                       {"--frames", "20", "--compute-queue", "separate", "--width",
                        std::to_string(kWidth), "--height", std::to_string(kHeight)},
                       queues_env);
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_TRUE(contains(second.out, "on a second queue of family")) << second.out;
  EXPECT_FALSE(contains(second.out + second.err, "Validation Error")) << second.out << second.err;
  const AppRun sliced = runApp("play", {"--compute-queue", "separate", "--slice-ms", "1"});
  EXPECT_EQ(sliced.exit_code, 2);
  EXPECT_TRUE(contains(sliced.err, "--sharing concurrent")) << sliced.err;
}

TEST_F(PlayApp, WithoutADisplaySaysToUseXvfb) {
  const AppRun run = runApp("play", {"--frames", "1"}, {{"DISPLAY", ""}, {"WAYLAND_DISPLAY", ""}});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_TRUE(contains(run.err, "xvfb-run")) << run.err;
}

// vkgrad-play picks its device by the rule every program has: --device, else VKGRAD_DEVICE.
TEST_F(PlayApp, TakesTheDeviceOptionAndVariable) {
  const std::string xvfb_run = findXvfbRun();
  ASSERT_FALSE(xvfb_run.empty()) << "xvfb-run is not on PATH (Debian: xvfb xauth)";
  const AppRun named =
      runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority", {"--frames", "2", "--device", "0"});
  EXPECT_EQ(named.exit_code, 0) << named.err;
  const AppRun none =
      runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority", {"--frames", "2"}, {{"VKGRAD_DEVICE", "99"}});
  EXPECT_EQ(none.exit_code, 1) << none.out;
  EXPECT_TRUE(contains(none.err, "VKGRAD_DEVICE='99' matches no Vulkan device")) << none.err;
  const AppRun blank =
      runPlayUnderXvfb(xvfb_run, dir_ / "Xauthority", {"--frames", "2", "--device", " "});
  EXPECT_EQ(blank.exit_code, 1) << blank.err;
  EXPECT_TRUE(contains(blank.err, "is blank")) << blank.err;
  const AppRun tall = runApp("play", {"--grid", "1024", "--width", "16", "--height", "8192"});
  EXPECT_EQ(tall.exit_code, 2);
  EXPECT_TRUE(contains(tall.err, "at most 4096 down")) << tall.err;
}

TEST_F(PlayApp, HelpExitsZeroAndBadOptionsExitTwo) {
  const AppRun help = runApp("play", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "usage: vkgrad-play")) << help.out;
  for (const char* option : {"--frames", "--screenshot", "--steps-per-frame", "--validation"})
    EXPECT_TRUE(contains(help.out, option)) << option << "\n" << help.out;
  EXPECT_EQ(runApp("play", {"--no-such-option"}).exit_code, 2);
  EXPECT_EQ(runApp("play", {"--frames", "-1"}).exit_code, 2);
  EXPECT_EQ(runApp("play", {"--compute-queue", "async"}).exit_code, 2);
  EXPECT_EQ(runApp("play", {"--sharing", "both"}).exit_code, 2);
}

}  // namespace
}  // namespace vkgrad::test
