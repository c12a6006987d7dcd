#include "play/play.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/device_options.h"
#include "play/classifier.h"
#include "play/device.h"
#include "play/renderer.h"
#include "play/swapchain.h"

namespace vkgrad::play {
namespace {

using Clock = std::chrono::steady_clock;

// The loss after every inference against the step it was measured at, in at most
// Renderer::kCurvePoints points: when full, each pair of neighbours becomes its mean, so the
// curve always spans the whole run.
class LossCurve {
 public:
  void add(int64_t step, float loss) {
    step_sum_ += double(step);
    loss_sum_ += loss;
    if (++pending_ < per_value_) return;
    steps_.push_back(step_sum_ / pending_);
    losses_.push_back(loss_sum_ / pending_);
    step_sum_ = loss_sum_ = 0.0;
    pending_ = 0;
    if (losses_.size() < size_t(Renderer::kCurvePoints)) return;
    for (std::vector<double>* v : {&steps_, &losses_}) {
      for (size_t i = 0; i < v->size() / 2; ++i) (*v)[i] = 0.5 * ((*v)[2 * i] + (*v)[2 * i + 1]);
      v->resize(v->size() / 2);
    }
    per_value_ *= 2;
  }
  const std::vector<double>& steps() const { return steps_; }
  const std::vector<double>& losses() const { return losses_; }

 private:
  std::vector<double> steps_, losses_;
  int per_value_ = 1, pending_ = 0;
  double step_sum_ = 0.0, loss_sum_ = 0.0;
};

// Frame time and training speed over the last half second or so.
class Rates {
 public:
  // True when a new window of measurements is complete.
  bool frame(int64_t steps) {
    ++frames_;
    const Clock::time_point now = Clock::now();
    const double seconds = std::chrono::duration<double>(now - since_).count();
    if (seconds < 0.5 && frames_ < 1000) return false;
    ms_per_frame_ = 1000.0 * seconds / double(frames_);
    steps_per_second_ = double(steps - steps_) / seconds;
    since_ = now;
    frames_ = 0;
    steps_ = steps;
    return true;
  }
  double msPerFrame() const { return ms_per_frame_; }
  double stepsPerSecond() const { return steps_per_second_; }

 private:
  Clock::time_point since_ = Clock::now();
  int64_t frames_ = 0, steps_ = 0;
  double ms_per_frame_ = 0.0, steps_per_second_ = 0.0;
};

void onKey(GLFWwindow* window, int key, int, int action, int) {
  if (key == GLFW_KEY_ESCAPE && action == GLFW_PRESS) glfwSetWindowShouldClose(window, GLFW_TRUE);
}

// Everything but the count of validation messages, which must outlive the device: tearing
// down is validated too.
// The window's title: where training is and how fast frames and steps go.
void showRates(GLFWwindow* window, int64_t steps, const LossCurve& curve, const Rates& rates) {
  char title[160];
  std::snprintf(title, sizeof(title),
                "vkgrad-play: step %lld, loss %.3f, %.1f ms/frame, %.0f steps/s",
                static_cast<long long>(steps), curve.losses().empty() ? 0.0 : curve.losses().back(),
                rates.msPerFrame(), rates.stepsPerSecond());
  glfwSetWindowTitle(window, title);
}

// The line a run ends with. `loss`: the last inference's, as the engine or a frame read it.
void printSummary(const Classifier& classifier, float loss, int64_t frame, double seconds,
                  double engine_ms, double slowest_ms, const char* device) {
  std::printf(
      "vkgrad-play: %lld frames, %lld steps in %.2f s: %.1f ms/frame (slowest %.1f), "
      "%.0f steps/s, %.1f ms/frame in engine calls, loss %.4f (%s)\n",
      static_cast<long long>(frame), static_cast<long long>(classifier.steps()), seconds,
      frame ? 1000.0 * seconds / double(frame) : 0.0, slowest_ms,
      seconds > 0 ? double(classifier.steps()) / seconds : 0.0,
      frame ? engine_ms / double(frame) : 0.0, double(loss), device);
}

// The plane is 2.4 units tall and as wide as the window's aspect makes it; the grid's cells
// are square.
ClassifierOptions classifierOptions(const PlayOptions& o) {
  const float aspect = float(o.width) / float(o.height);
  ClassifierOptions co;
  co.plane = {-1.2f * aspect, -1.2f, 1.2f * aspect, 1.2f};
  co.grid_width = o.grid;
  co.grid_height = std::max(2, int(std::lround(float(o.grid) / aspect)));
  co.lr = o.lr;
  co.seed = o.seed;
  co.hidden = o.hidden;
  co.slice_ms = o.slice_ms;
  return co;
}

// The engine's work in a frame, whole steps: at most one training step in flight, and the frame
// does not wait for it (further steps of --steps-per-frame each wait for the one before); an
// inference whenever training has moved on and the last inference is done, after frame_wait.
// Returns whether an inference was submitted; `shown` is then its timeline value.
bool engineSteps(Classifier& classifier, int steps_per_frame,
                 std::span<const vk::SemaphoreWait> frame_wait, uint64_t& shown) {
  if (!classifier.training())
    for (int s = 0; s < steps_per_frame; ++s) classifier.trainAsync();
  if (classifier.steps() == classifier.inferredStep() || classifier.inferring()) return false;
  shown = classifier.inferAsync(frame_wait);
  return true;
}

// The same in pieces (--slice-ms): one piece a frame, once the last one has finished: an
// inference part-way, or a new one once a whole step has landed, else the training step's
// next piece. Any inference piece may write what frames read (the logits, the loss), so
// `shown` becomes the last one submitted, as each piece waits for the frame before it.
// Returns whether an inference was completed (its last piece submitted).
bool enginePiece(Classifier& classifier, std::span<const vk::SemaphoreWait> frame_wait,
                 uint64_t& shown) {
  if (classifier.pieceBusy()) return false;
  if (!classifier.inferenceOpen() &&
      (classifier.stepOpen() || classifier.steps() == classifier.inferredStep())) {
    classifier.trainPiece();
    return false;
  }
  const bool done = classifier.inferPiece(frame_wait).has_value();
  shown = classifier.lastInference();
  return done;
}

// The engine's work in this frame, whole steps or a piece (--slice-ms). An inference waits on
// the device for the last submitted frame, which may still be reading the logits.
bool engineFrame(const PlayOptions& o, Classifier& classifier, const Renderer& renderer,
                 uint64_t& shown) {
  const vk::SemaphoreWait after_frame{renderer.timeline(), renderer.submitted(),
                                      VK_PIPELINE_STAGE_ALL_COMMANDS_BIT};
  const std::span<const vk::SemaphoreWait> frame_wait(&after_frame, renderer.submitted() ? 1 : 0);
  return o.slice_ms > 0 ? enginePiece(classifier, frame_wait, shown)
                        : engineSteps(classifier, o.steps_per_frame, frame_wait, shown);
}

void run(const PlayOptions& o, std::atomic<size_t>& messages) {
  vk::ContextOptions choice;
  choice.device = o.device;
  choice.device_source = "--device";
  Device device(o.width, o.height, "vkgrad-play", o.validation, vk::deviceSelector(choice),
                {o.separate_queue, o.concurrent_sharing}, messages);
  if (!device.computeNote().empty()) std::printf("vkgrad-play: %s\n", device.computeNote().c_str());
  glfwSetKeyCallback(device.window(), onKey);
  Swapchain swapchain(device, !o.screenshot.empty());

  const ClassifierOptions co = classifierOptions(o);
  const Spirals data = makeSpirals(o.points_per_class, o.seed);

  vk::Context context(device.externalDevice());
  Classifier classifier(context, data, co);
  // Exclusive buffers of another family: each inference ends by releasing what frames read.
  if (device.transfersOwnership()) classifier.releaseResultsTo(device.queueFamily());
  if (o.slice_ms > 0)
    std::printf(
        "vkgrad-play: a training step in %d pieces, an inference in %d, of at most %.1f ms "
        "of GPU time each\n",
        classifier.trainPieces(), classifier.inferPieces(), o.slice_ms);
  Renderer renderer(
      device, swapchain,
      {classifier.logits(), classifier.lossBuffer(), co.grid_width, co.grid_height, co.plane, &data,
       device.transfersOwnership() ? context.queueFamily() : VK_QUEUE_FAMILY_IGNORED});
  LossCurve curve;
  std::deque<int64_t> loss_steps;  // the step of each inference whose loss a frame copies
  Rates rates;
  // The engine's timeline value of the inference the frames draw: sliced, the one the
  // Classifier ran in pieces when it was built.
  uint64_t shown = o.slice_ms > 0 ? classifier.lastInference() : 0;
  int64_t frame = 0;
  double engine_ms = 0.0;  // host time spent in the engine's calls (its uploads wait)
  const Clock::time_point start = Clock::now();
  Clock::time_point frame_start = start;
  double slowest_ms = 0.0;  // the longest frame after the first few (pipelines, swapchain)
  float copied_loss = 0.0f;  // the last loss a frame copied out
  while (o.frames == 0 || frame < o.frames) {
    glfwPollEvents();
    // Closing the window ends the run; with --screenshot, after one more frame to copy.
    const bool closing = glfwWindowShouldClose(device.window());
    if (closing && o.screenshot.empty()) break;
    const bool last = closing || frame + 1 == o.frames;
    if (!renderer.beginFrame()) continue;  // the swapchain was rebuilt
    if (const std::optional<float> loss = renderer.takeLoss()) {
      curve.add(loss_steps.front(), *loss);  // losses come back in the order frames copied them
      loss_steps.pop_front();
      copied_loss = *loss;
    }

    const Clock::time_point engine_start = Clock::now();
    const bool fresh = engineFrame(o, classifier, renderer, shown);
    if (fresh) loss_steps.push_back(classifier.inferredStep());
    engine_ms += std::chrono::duration<double, std::milli>(Clock::now() - engine_start).count();

    renderer.setCurve(curve.steps(), curve.losses());
    // The frame waits for that inference on the device (and copies its loss out when it is
    // new); the host does not wait.
    renderer.endFrame(context.timeline(), shown, fresh, last && !o.screenshot.empty());
    ++frame;
    const Clock::time_point now = Clock::now();
    if (frame > 5)
      slowest_ms = std::max(slowest_ms,
                            std::chrono::duration<double, std::milli>(now - frame_start).count());
    frame_start = now;
    if (rates.frame(classifier.steps()))
      showRates(device.window(), classifier.steps(), curve, rates);
    if (closing) break;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!o.screenshot.empty()) renderer.screenshot(o.screenshot);
  // Released to the graphics family, the last loss is the frames' to read, not the engine's.
  printSummary(classifier, device.transfersOwnership() ? copied_loss : classifier.loss(), frame,
               seconds, engine_ms, slowest_ms, device.properties().deviceName);
  if (!o.screenshot.empty()) std::printf("screenshot: %s\n", o.screenshot.c_str());
}

}  // namespace

int play(const PlayOptions& options) {
  std::atomic<size_t> messages{0};
  run(options, messages);
  return apps::validationFailed(messages, "vkgrad-play") ? 1 : 0;
}

}  // namespace vkgrad::play
