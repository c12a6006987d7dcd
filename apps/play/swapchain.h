// The window's swapchain with a view and a framebuffer per image, and the render passes the
// app draws with. FIFO presentation: the one mode every driver has (vsync where the window
// system has a display to sync with; under Xvfb it simply presents in order).
#pragma once

#include <vector>

#include "play/device.h"

namespace vkgrad::play {

class Swapchain {
 public:
  // readable: the images can be copied from (--screenshot); throws Error where they cannot.
  Swapchain(const Device& device, bool readable);
  ~Swapchain();
  Swapchain(const Swapchain&) = delete;
  Swapchain& operator=(const Swapchain&) = delete;

  // Rebuilds the swapchain for the window's current size; the caller has waited until no
  // frame uses it. Waits (handling events) while the window is minimised to nothing.
  void recreate();

  VkSwapchainKHR handle() const { return swapchain_; }
  VkExtent2D extent() const { return extent_; }
  VkFormat format() const { return format_; }
  uint32_t imageCount() const { return uint32_t(images_.size()); }
  VkImage image(uint32_t i) const { return images_.at(i); }
  VkFramebuffer framebuffer(uint32_t i) const { return framebuffers_.at(i); }
  // Two compatible passes (one set of pipelines serves both): the image ends ready to present,
  // or ready to be copied out (a screenshot's frame; the copy then makes it presentable).
  VkRenderPass renderPass() const { return pass_present_; }
  VkRenderPass renderPassForCopy() const { return pass_copy_; }

 private:
  void create(VkSwapchainKHR old);
  void destroyImages();
  VkRenderPass createPass(bool for_copy) const;

  const Device& device_;
  bool readable_;
  VkFormat format_ = VK_FORMAT_UNDEFINED;
  VkColorSpaceKHR colour_space_ = VK_COLOR_SPACE_SRGB_NONLINEAR_KHR;
  VkRenderPass pass_present_ = VK_NULL_HANDLE, pass_copy_ = VK_NULL_HANDLE;
  VkSwapchainKHR swapchain_ = VK_NULL_HANDLE;
  VkExtent2D extent_{};
  std::vector<VkImage> images_;
  std::vector<VkImageView> views_;
  std::vector<VkFramebuffer> framebuffers_;
};

}  // namespace vkgrad::play
