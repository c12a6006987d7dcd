// vkgrad-play: a window in which vkgrad trains a small classifier on three spirals while the
// app draws its decision regions from the engine's own buffer, on one shared VkDevice.
// The app creates the instance, device and swapchain itself (its own volk) and hands the
// device to vkgrad (vk::ExternalDevice); play.cpp has the frame loop.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/app_main.h"
#include "common/cli.h"
#include "play/play.h"

namespace vkgrad::apps {
namespace {

int run(int argc, char** argv) {
  Cli cli("vkgrad-play",
          "Opens a window in which vkgrad trains an MLP (2-H-H-3, GELU) on three spirals, on\n"
          "the app's own Vulkan device, while the window shows the model's decision regions\n"
          "(read in place from the engine's buffer), the points and the loss curve. Frame time\n"
          "and training steps/s are in the title. Needs a display: without one, run it under\n"
          "Xvfb: xvfb-run -a vkgrad-play --frames 60 --screenshot play.png");
  cli.option("frames", "stop after N frames (0: when the window is closed)", "0");
  cli.option("screenshot", "after the last frame, write it to this PNG file");
  cli.option("width", "window width, pixels", "640");
  cli.option("height", "window height, pixels", "480");
  cli.option("steps-per-frame",
             "training steps per frame; one runs beside the frame, each further one makes the "
             "frame wait for the step before it",
             "1");
  cli.option("points", "spiral points per class", "100");
  cli.option("grid", "inference points across the window (down: by its aspect)", "128");
  cli.option("lr", "learning rate (AdamW)", "0.02");
  cli.option("hidden", "the MLP's hidden width (wider: a longer training step)", "32");
  cli.option("slice-ms",
             "0: each training step and inference in one submission; > 0: each recorded in "
             "pieces of at most this many ms of GPU time (from a timed run of each at the "
             "start), one piece per frame, so that a step longer than a frame spreads over "
             "several",
             "0");
  cli.option("seed", "data and initialisation seed", "1");
  cli.option("device",
             "device index or part of its name (default: VKGRAD_DEVICE, else discrete > "
             "integrated > any); it must draw to the window too");
  cli.option("compute-queue",
             "same: the engine computes on the graphics queue; separate: on a queue of its own "
             "(a compute-only family where the device has one: async compute), or says why not",
             "same");
  cli.option("sharing",
             "with a separate family: exclusive (each inference's results move to the graphics "
             "family by a release and an acquire) or concurrent (buffers shared by both)",
             "exclusive");
  cli.flag("validation",
           "enable the Khronos validation layer with synchronisation validation; any message "
           "fails the run (also VKGRAD_VALIDATION=1)");
  cli.parse(argc, argv);

  play::PlayOptions o;
  o.frames = cli.getInt("frames", 0, INT64_MAX);
  o.screenshot = cli.get("screenshot");
  o.width = int(cli.getInt("width", 16, 8192));
  o.height = int(cli.getInt("height", 16, 8192));
  o.steps_per_frame = int(cli.getInt("steps-per-frame", 1, 1000));
  o.points_per_class = int(cli.getInt("points", 1, 100000));
  o.grid = int(cli.getInt("grid", 2, 1024));
  // The grid goes down by the window's aspect: a tall, narrow window makes it very tall.
  const double down = double(o.grid) * o.height / o.width;
  if (down > 4096)
    cli.fail("--grid " + std::to_string(o.grid) + " in a " + std::to_string(o.width) + "x" +
             std::to_string(o.height) + " window is " + std::to_string(o.grid) + " x " +
             std::to_string(int64_t(down)) +
             " points; at most 4096 down (a smaller --grid or a "
             "wider window)");
  o.lr = float(cli.getDouble("lr", 0.0, 10.0));
  o.hidden = int(cli.getInt("hidden", 1, 8192));
  o.slice_ms = cli.getDouble("slice-ms", 0.0, 1e4);
  o.seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));
  o.device = cli.get("device");
  const std::string queue = cli.get("compute-queue"), sharing = cli.get("sharing");
  if (queue != "same" && queue != "separate")
    cli.fail("--compute-queue takes same or separate, not '" + queue + "'");
  if (sharing != "exclusive" && sharing != "concurrent")
    cli.fail("--sharing takes exclusive or concurrent, not '" + sharing + "'");
  o.separate_queue = queue == "separate";
  o.concurrent_sharing = sharing == "concurrent";
  // Sliced, the frames draw the logits between an inference's pieces, while the engine's
  // family writes them: only buffers both families share allow that.
  if (o.separate_queue && !o.concurrent_sharing && o.slice_ms > 0)
    cli.fail(
        "--slice-ms with --compute-queue separate needs --sharing concurrent: frames draw "
        "the logits between an inference's pieces, which exclusive buffers do not allow");
  const char* env = std::getenv("VKGRAD_VALIDATION");
  o.validation = cli.has("validation") || (env && std::string(env) == "1");
  return play::play(o);
}

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  return vkgrad::apps::guardedMain("vkgrad-play", vkgrad::apps::run, argc, argv);
}
