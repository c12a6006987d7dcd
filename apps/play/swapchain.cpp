#include "play/swapchain.h"

#include <algorithm>

namespace vkgrad::play {

Swapchain::Swapchain(const Device& device, bool readable) : device_(device), readable_(readable) {
  uint32_t count = 0;
  VK_CHECK(
      vkGetPhysicalDeviceSurfaceFormatsKHR(device.physical(), device.surface(), &count, nullptr));
  std::vector<VkSurfaceFormatKHR> formats(count);
  VK_CHECK(vkGetPhysicalDeviceSurfaceFormatsKHR(device.physical(), device.surface(), &count,
                                                formats.data()));
  if (formats.empty()) throw Error("the window's surface offers no image format");
  // UNORM rather than SRGB: the shaders' colours are stored as they are, so the window and
  // the screenshot show the same bytes.
  format_ = formats[0].format;
  colour_space_ = formats[0].colorSpace;
  for (const VkSurfaceFormatKHR& f : formats)
    if ((f.format == VK_FORMAT_B8G8R8A8_UNORM || f.format == VK_FORMAT_R8G8B8A8_UNORM) &&
        f.colorSpace == VK_COLOR_SPACE_SRGB_NONLINEAR_KHR) {
      format_ = f.format;
      colour_space_ = f.colorSpace;
      break;
    }
  if (readable && format_ != VK_FORMAT_B8G8R8A8_UNORM && format_ != VK_FORMAT_R8G8B8A8_UNORM)
    throw Error("--screenshot needs 8-bit RGBA or BGRA swapchain images; this surface offers " +
                std::to_string(int(format_)) + " first");
  pass_present_ = createPass(false);
  pass_copy_ = createPass(true);
  create(VK_NULL_HANDLE);
}

Swapchain::~Swapchain() {
  destroyImages();
  if (swapchain_) vkDestroySwapchainKHR(device_.device(), swapchain_, nullptr);
  vkDestroyRenderPass(device_.device(), pass_copy_, nullptr);
  vkDestroyRenderPass(device_.device(), pass_present_, nullptr);
}

VkRenderPass Swapchain::createPass(bool for_copy) const {
  VkAttachmentDescription colour{};
  colour.format = format_;
  colour.samples = VK_SAMPLE_COUNT_1_BIT;
  colour.loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR;
  colour.storeOp = VK_ATTACHMENT_STORE_OP_STORE;
  colour.stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE;
  colour.stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE;
  colour.initialLayout = VK_IMAGE_LAYOUT_UNDEFINED;  // every pixel is drawn anew
  colour.finalLayout =
      for_copy ? VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL : VK_IMAGE_LAYOUT_PRESENT_SRC_KHR;
  VkAttachmentReference ref{0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkSubpassDescription subpass{};
  subpass.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS;
  subpass.colorAttachmentCount = 1;
  subpass.pColorAttachments = &ref;

  VkSubpassDependency dependencies[2] = {};
  // The image is acquired when the acquire semaphore is waited for, at colour output: the
  // layout transition and the clear come after that wait.
  dependencies[0].srcSubpass = VK_SUBPASS_EXTERNAL;
  dependencies[0].dstSubpass = 0;
  dependencies[0].srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  dependencies[0].dstStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  dependencies[0].dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT;
  // A screenshot copies the picture after the pass. (Both passes carry this dependency:
  // passes are compatible, and share pipelines and framebuffers, only with equal ones.)
  dependencies[1].srcSubpass = 0;
  dependencies[1].dstSubpass = VK_SUBPASS_EXTERNAL;
  dependencies[1].srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  dependencies[1].srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT;
  dependencies[1].dstStageMask = VK_PIPELINE_STAGE_TRANSFER_BIT;
  dependencies[1].dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;

  VkRenderPassCreateInfo info{VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO};
  info.attachmentCount = 1;
  info.pAttachments = &colour;
  info.subpassCount = 1;
  info.pSubpasses = &subpass;
  info.dependencyCount = 2;
  info.pDependencies = dependencies;
  VkRenderPass pass = VK_NULL_HANDLE;
  VK_CHECK(vkCreateRenderPass(device_.device(), &info, nullptr, &pass));
  return pass;
}

void Swapchain::recreate() {
  const VkSwapchainKHR old = swapchain_;
  destroyImages();
  create(old);
  vkDestroySwapchainKHR(device_.device(), old, nullptr);
}

void Swapchain::create(VkSwapchainKHR old) {
  VkSurfaceCapabilitiesKHR caps;
  VK_CHECK(vkGetPhysicalDeviceSurfaceCapabilitiesKHR(device_.physical(), device_.surface(), &caps));
  extent_ = caps.currentExtent;
  if (extent_.width == UINT32_MAX) {  // the window system leaves the size to the swapchain
    int w = 0, h = 0;
    glfwGetFramebufferSize(device_.window(), &w, &h);
    extent_.width = std::clamp(uint32_t(w), caps.minImageExtent.width, caps.maxImageExtent.width);
    extent_.height =
        std::clamp(uint32_t(h), caps.minImageExtent.height, caps.maxImageExtent.height);
  }
  while ((extent_.width == 0 || extent_.height == 0) &&
         !glfwWindowShouldClose(device_.window())) {  // minimised: nothing to draw into
    glfwWaitEvents();
    VK_CHECK(
        vkGetPhysicalDeviceSurfaceCapabilitiesKHR(device_.physical(), device_.surface(), &caps));
    extent_ = caps.currentExtent;
  }
  extent_.width = std::max(extent_.width, 1u);
  extent_.height = std::max(extent_.height, 1u);

  VkImageUsageFlags usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT;
  if (readable_) {
    if (!(caps.supportedUsageFlags & VK_IMAGE_USAGE_TRANSFER_SRC_BIT))
      throw Error("--screenshot: this window's swapchain images cannot be copied from");
    usage |= VK_IMAGE_USAGE_TRANSFER_SRC_BIT;
  }
  VkCompositeAlphaFlagBitsKHR alpha = VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR;
  for (VkCompositeAlphaFlagBitsKHR a :
       {VK_COMPOSITE_ALPHA_OPAQUE_BIT_KHR, VK_COMPOSITE_ALPHA_INHERIT_BIT_KHR,
        VK_COMPOSITE_ALPHA_PRE_MULTIPLIED_BIT_KHR, VK_COMPOSITE_ALPHA_POST_MULTIPLIED_BIT_KHR})
    if (caps.supportedCompositeAlpha & a) {
      alpha = a;
      break;
    }

  VkSwapchainCreateInfoKHR info{VK_STRUCTURE_TYPE_SWAPCHAIN_CREATE_INFO_KHR};
  info.surface = device_.surface();
  info.minImageCount = caps.minImageCount + 1;  // one to draw while others wait to be shown
  if (caps.maxImageCount > 0) info.minImageCount = std::min(info.minImageCount, caps.maxImageCount);
  info.imageFormat = format_;
  info.imageColorSpace = colour_space_;
  info.imageExtent = extent_;
  info.imageArrayLayers = 1;
  info.imageUsage = usage;
  info.imageSharingMode = VK_SHARING_MODE_EXCLUSIVE;
  info.preTransform = caps.currentTransform;
  info.compositeAlpha = alpha;
  info.presentMode = VK_PRESENT_MODE_FIFO_KHR;  // required of every driver
  info.clipped = VK_TRUE;
  info.oldSwapchain = old;
  VK_CHECK(vkCreateSwapchainKHR(device_.device(), &info, nullptr, &swapchain_));

  uint32_t count = 0;
  VK_CHECK(vkGetSwapchainImagesKHR(device_.device(), swapchain_, &count, nullptr));
  images_.resize(count);
  VK_CHECK(vkGetSwapchainImagesKHR(device_.device(), swapchain_, &count, images_.data()));
  for (VkImage image : images_) {
    VkImageViewCreateInfo view_info{VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO};
    view_info.image = image;
    view_info.viewType = VK_IMAGE_VIEW_TYPE_2D;
    view_info.format = format_;
    view_info.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkImageView view = VK_NULL_HANDLE;
    VK_CHECK(vkCreateImageView(device_.device(), &view_info, nullptr, &view));
    views_.push_back(view);
    VkFramebufferCreateInfo fb{VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO};
    fb.renderPass = pass_present_;  // and the compatible pass_copy_
    fb.attachmentCount = 1;
    fb.pAttachments = &view;
    fb.width = extent_.width;
    fb.height = extent_.height;
    fb.layers = 1;
    VkFramebuffer framebuffer = VK_NULL_HANDLE;
    VK_CHECK(vkCreateFramebuffer(device_.device(), &fb, nullptr, &framebuffer));
    framebuffers_.push_back(framebuffer);
  }
}

void Swapchain::destroyImages() {
  for (VkFramebuffer f : framebuffers_) vkDestroyFramebuffer(device_.device(), f, nullptr);
  for (VkImageView v : views_) vkDestroyImageView(device_.device(), v, nullptr);
  framebuffers_.clear();
  views_.clear();
  images_.clear();
}

}  // namespace vkgrad::play
