// Draws a frame: the decision regions from the engine's logits buffer (bound in place as a
// storage buffer), the data points over them and the loss panel (a line plot with axes that
// apps/common draws on the CPU), into the next swapchain image; optionally copies that image
// out for a screenshot. Two frames in flight, each with its own command buffer, fence, acquire
// semaphore and loss-panel buffer.
//
// Synchronisation with the engine, all on the one shared queue: a frame's submission waits
// for the engine's timeline at the value of the inference it shows (fragment stage), and
// signals this renderer's own timeline semaphore (frame n: value n) when it is done, which
// the next inference waits for before it overwrites the logits (classifier.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "play/classifier.h"
#include "play/device.h"
#include "play/host_buffer.h"
#include "play/swapchain.h"

namespace vkgrad::play {

struct Scene {
  vk::BufferRange logits;  // the engine's (grid_height, grid_width, kClasses) f32
  vk::BufferRange loss;    // the engine's (1) f32, copied out by the frames for the curve
  int grid_width = 0, grid_height = 0;
  Plane plane{};
  const Spirals* data = nullptr;  // uploaded once
  // The engine's queue family when a frame that shows a new inference must first acquire
  // logits and loss from it (exclusive buffers, another family); IGNORED: nothing to acquire.
  uint32_t acquire_from = VK_QUEUE_FAMILY_IGNORED;
};

class Renderer {
 public:
  static constexpr int kFramesInFlight = 2;
  static constexpr int kCurvePoints = 256;
  // The loss panel's largest size, pixels (its buffers are allocated for it).
  static constexpr int kPanelWidth = 400, kPanelHeight = 260;

  Renderer(const Device& device, Swapchain& swapchain, const Scene& scene);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Waits for this slot's frame of two frames ago (the app's own fence) and acquires the
  // next image. False when the swapchain had to be rebuilt first: skip this frame.
  bool beginFrame();
  // The loss a finished frame copied from the engine (endFrame's copy_loss), once, in the
  // order the frames were submitted; nothing when there is none new. After beginFrame().
  std::optional<float> takeLoss();
  // The loss after each inference so far against the step it was measured at (at most
  // kCurvePoints, oldest first), for this frame's panel: a log-scale plot with axes, redrawn
  // when the curve or the window's size changed. Fewer than 2 points, or a window too small
  // for a legible plot: no panel.
  void setCurve(std::span<const double> steps, std::span<const double> losses);
  // Records and submits the frame after the engine's timeline reaches `engine_value` (0:
  // nothing to wait for), then presents it. copy_loss: the frame also copies the engine's
  // loss for takeLoss() (a device copy: no host read waits for the engine). screenshot: it
  // also copies the image for screenshot().
  void endFrame(VkSemaphore engine_timeline, uint64_t engine_value, bool copy_loss,
                bool screenshot);

  // The renderer's timeline: frame n signals n when it has been drawn.
  VkSemaphore timeline() const { return timeline_; }
  uint64_t submitted() const { return frames_; }

  // Writes the last copied frame as a PNG (waits for it first). Throws Error without one.
  void screenshot(const std::filesystem::path& path);

 private:
  struct Frame {
    VkCommandBuffer cmd = VK_NULL_HANDLE;
    VkFence done = VK_NULL_HANDLE;
    VkSemaphore acquired = VK_NULL_HANDLE;
    std::unique_ptr<HostBuffer> panel;
    uint64_t panel_version = 0;        // of the panel its buffer holds
    std::unique_ptr<HostBuffer> loss;  // the engine's loss, copied by this frame
    bool copied_loss = false;
    VkDescriptorSet set = VK_NULL_HANDLE;
  };
  void createPipelines();
  void createDescriptors(const Scene& scene);
  void createPresentSemaphores();
  void destroyPresentSemaphores();
  void rebuildSwapchain();
  // Until every submitted frame has finished. Not vkDeviceWaitIdle: it would wait for the
  // engine too, and the 1.3.239 layer's submit-time synchronisation validation crashes in it.
  void waitForFrames();
  void record(Frame& f, uint32_t image, bool copy_loss, bool screenshot);
  void takeResults(Frame& f);  // record()'s part for a new inference

  const Device& device_;
  Swapchain& swapchain_;
  Scene scene_;
  uint32_t logits_first_ = 0;  // floats from the bound range's start to the logits
  std::unique_ptr<HostBuffer> points_;
  std::unique_ptr<HostBuffer> readback_;  // the screenshot's pixels
  VkExtent2D readback_extent_{};
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline field_ = VK_NULL_HANDLE, points_pipeline_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  Frame frames_in_flight_[kFramesInFlight];
  // One per swapchain image: presentation holds it until that image is acquired again.
  std::vector<VkSemaphore> rendered_;
  // The panel as last drawn (field.frag's Panel: origin, size, then 0x00RRGGBB pixels).
  std::vector<uint32_t> panel_;
  uint64_t panel_version_ = 0;
  std::vector<double> panel_key_;  // what it was drawn from: extent, count, last point
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t frames_ = 0;
  uint32_t image_ = 0;         // acquired by beginFrame
  std::optional<float> loss_;  // from the frame beginFrame waited for
};

}  // namespace vkgrad::play
