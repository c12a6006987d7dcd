#include "play/renderer.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "common/canvas.h"
#include "common/plot.h"
#include "play/pipeline.h"

// SPIR-V of apps/play/shaders, compiled at build time (glslangValidator --vn).
#include "field_frag.h"
#include "field_vert.h"
#include "points_frag.h"
#include "points_vert.h"

namespace vkgrad::play {
namespace {

// shaders/common.glsl's push constants, member for member.
struct Push {
  float plane[4];     // left, bottom, right, top
  float viewport[2];  // pixels
  uint32_t grid[2];   // points across, down
  uint32_t first;     // the logits' first float in binding 0
  float radius;       // of a data point, pixels
};
static_assert(sizeof(Push) == 40);

// The loss panel's storage buffer (field.frag's Panel) before its pixels.
struct PanelHeader {
  int32_t origin[2];
  int32_t size[2];
};

}  // namespace

Renderer::Renderer(const Device& device, Swapchain& swapchain, const Scene& scene)
    : device_(device), swapchain_(swapchain), scene_(scene) {
  const VkDevice dev = device.device();
  VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  VkSemaphoreCreateInfo timeline{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  timeline.pNext = &type;
  VK_CHECK(vkCreateSemaphore(dev, &timeline, nullptr, &timeline_));

  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = device.queueFamily();
  VK_CHECK(vkCreateCommandPool(dev, &pool, nullptr, &pool_));
  for (Frame& f : frames_in_flight_) {
    VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    allocate.commandPool = pool_;
    allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    allocate.commandBufferCount = 1;
    VK_CHECK(vkAllocateCommandBuffers(dev, &allocate, &f.cmd));
    VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    fence.flags = VK_FENCE_CREATE_SIGNALED_BIT;  // the first wait finds nothing to wait for
    VK_CHECK(vkCreateFence(dev, &fence, nullptr, &f.done));
    VkSemaphoreCreateInfo binary{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VK_CHECK(vkCreateSemaphore(dev, &binary, nullptr, &f.acquired));
    f.panel =
        std::make_unique<HostBuffer>(device, sizeof(PanelHeader) + 4 * kPanelWidth * kPanelHeight,
                                     VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
    std::memset(f.panel->data(), 0, f.panel->bytes());  // size (0, 0): no panel yet
    f.loss = std::make_unique<HostBuffer>(device, 4, VK_BUFFER_USAGE_TRANSFER_DST_BIT);
  }
  createPresentSemaphores();

  const std::vector<uint32_t>& labels = scene.data->labels;
  points_ = std::make_unique<HostBuffer>(device, 16 * std::max<size_t>(labels.size(), 1),
                                         VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
  auto* point = static_cast<float*>(points_->data());
  for (size_t i = 0; i < labels.size(); ++i, point += 4) {
    point[0] = scene.data->xy[2 * i];
    point[1] = scene.data->xy[2 * i + 1];
    point[2] = float(labels[i]);
    point[3] = 0.0f;
  }
  createDescriptors(scene);
  createPipelines();
}

Renderer::~Renderer() {
  const VkDevice dev = device_.device();
  vkQueueWaitIdle(device_.queue());  // nothing of this renderer may still be in flight
  vkDestroyPipeline(dev, points_pipeline_, nullptr);
  vkDestroyPipeline(dev, field_, nullptr);
  vkDestroyPipelineLayout(dev, layout_, nullptr);
  vkDestroyDescriptorPool(dev, descriptor_pool_, nullptr);
  vkDestroyDescriptorSetLayout(dev, set_layout_, nullptr);
  destroyPresentSemaphores();
  for (Frame& f : frames_in_flight_) {
    vkDestroySemaphore(dev, f.acquired, nullptr);
    vkDestroyFence(dev, f.done, nullptr);
  }
  vkDestroyCommandPool(dev, pool_, nullptr);
  vkDestroySemaphore(dev, timeline_, nullptr);
}

void Renderer::createDescriptors(const Scene& scene) {
  const VkDevice dev = device_.device();
  VkDescriptorSetLayoutBinding bindings[3] = {};
  for (uint32_t b = 0; b < 3; ++b) {
    bindings[b].binding = b;
    bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[b].descriptorCount = 1;
    bindings[b].stageFlags = b == 2 ? VK_SHADER_STAGE_VERTEX_BIT : VK_SHADER_STAGE_FRAGMENT_BIT;
  }
  VkDescriptorSetLayoutCreateInfo layout{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  layout.bindingCount = 3;
  layout.pBindings = bindings;
  VK_CHECK(vkCreateDescriptorSetLayout(dev, &layout, nullptr, &set_layout_));

  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 3 * kFramesInFlight};
  VkDescriptorPoolCreateInfo pool{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool.maxSets = kFramesInFlight;
  pool.poolSizeCount = 1;
  pool.pPoolSizes = &size;
  VK_CHECK(vkCreateDescriptorPool(dev, &pool, nullptr, &descriptor_pool_));

  // A storage buffer's offset must be a multiple of the device's alignment, and the engine
  // places tensors at its own offsets: bind from the multiple below and tell the shader
  // where the logits start.
  const VkDeviceSize align = device_.properties().limits.minStorageBufferOffsetAlignment;
  const VkDeviceSize start = scene.logits.offset / align * align;
  logits_first_ = uint32_t((scene.logits.offset - start) / 4);
  for (Frame& f : frames_in_flight_) {
    VkDescriptorSetAllocateInfo allocate{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    allocate.descriptorPool = descriptor_pool_;
    allocate.descriptorSetCount = 1;
    allocate.pSetLayouts = &set_layout_;
    VK_CHECK(vkAllocateDescriptorSets(dev, &allocate, &f.set));
    const VkDescriptorBufferInfo buffers[3] = {
        {scene.logits.buffer, start, scene.logits.offset - start + scene.logits.bytes},
        {f.panel->buffer(), 0, VK_WHOLE_SIZE},
        {points_->buffer(), 0, VK_WHOLE_SIZE}};
    VkWriteDescriptorSet writes[3];
    for (uint32_t b = 0; b < 3; ++b) {
      writes[b] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      writes[b].dstSet = f.set;
      writes[b].dstBinding = b;
      writes[b].descriptorCount = 1;
      writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[b].pBufferInfo = &buffers[b];
    }
    vkUpdateDescriptorSets(dev, 3, writes, 0, nullptr);
  }
}

void Renderer::createPipelines() {
  const VkDevice dev = device_.device();
  VkPushConstantRange push{VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0,
                           sizeof(Push)};
  VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout.setLayoutCount = 1;
  layout.pSetLayouts = &set_layout_;
  layout.pushConstantRangeCount = 1;
  layout.pPushConstantRanges = &push;
  VK_CHECK(vkCreatePipelineLayout(dev, &layout, nullptr, &layout_));
  const VkShaderModule field_vert = shaderModule(dev, kFieldVert, sizeof(kFieldVert));
  const VkShaderModule field_frag = shaderModule(dev, kFieldFrag, sizeof(kFieldFrag));
  const VkShaderModule points_vert = shaderModule(dev, kPointsVert, sizeof(kPointsVert));
  const VkShaderModule points_frag = shaderModule(dev, kPointsFrag, sizeof(kPointsFrag));
  const VkRenderPass pass = swapchain_.renderPass();  // compatible with renderPassForCopy()
  field_ = createPipeline(dev, layout_, pass, field_vert, field_frag, false);
  points_pipeline_ = createPipeline(dev, layout_, pass, points_vert, points_frag, true);
  for (VkShaderModule m : {field_vert, field_frag, points_vert, points_frag})
    vkDestroyShaderModule(dev, m, nullptr);
}

void Renderer::createPresentSemaphores() {
  while (rendered_.size() < swapchain_.imageCount()) {
    VkSemaphoreCreateInfo binary{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    VK_CHECK(vkCreateSemaphore(device_.device(), &binary, nullptr, &rendered_.emplace_back()));
  }
}

void Renderer::destroyPresentSemaphores() {
  for (VkSemaphore s : rendered_) vkDestroySemaphore(device_.device(), s, nullptr);
  rendered_.clear();
}

void Renderer::rebuildSwapchain() {
  VK_CHECK(vkQueueWaitIdle(device_.queue()));  // rare (a resize): the simple way is fine
  swapchain_.recreate();
  // The old semaphores stay: a presentation may still wait on one, and nothing tells when
  // it is done with it. A new swapchain with more images gets more.
  createPresentSemaphores();
}

void Renderer::waitForFrames() {
  for (const Frame& f : frames_in_flight_)
    VK_CHECK(vkWaitForFences(device_.device(), 1, &f.done, VK_TRUE, UINT64_MAX));
}

bool Renderer::beginFrame() {
  Frame& f = frames_in_flight_[frames_ % kFramesInFlight];
  VK_CHECK(vkWaitForFences(device_.device(), 1, &f.done, VK_TRUE, UINT64_MAX));
  if (f.copied_loss) {
    float loss = 0.0f;
    std::memcpy(&loss, f.loss->data(), 4);
    loss_ = loss;
    f.copied_loss = false;
  }
  const VkResult acquired = vkAcquireNextImageKHR(device_.device(), swapchain_.handle(), UINT64_MAX,
                                                  f.acquired, VK_NULL_HANDLE, &image_);
  if (acquired == VK_ERROR_OUT_OF_DATE_KHR) {
    rebuildSwapchain();
    return false;
  }
  VK_CHECK(acquired);  // VK_SUBOPTIMAL_KHR still gives an image: draw it, rebuild after
  return true;
}

std::optional<float> Renderer::takeLoss() {
  return std::exchange(loss_, std::nullopt);
}

void Renderer::setCurve(std::span<const double> steps, std::span<const double> losses) {
  const VkExtent2D extent = swapchain_.extent();
  const size_t count = std::min({steps.size(), losses.size(), size_t(kCurvePoints)});
  std::vector<double> key{double(extent.width), double(extent.height), double(count)};
  if (count > 0) key.insert(key.end(), {steps[count - 1], losses[count - 1]});
  if (key != panel_key_) {
    panel_key_ = key;
    ++panel_version_;
    // About a third of the window, within what the buffers hold, and at least what a plot
    // with 12 px labels needs; 6 pixels in from the bottom-right corner.
    const int w = std::clamp(int(0.42 * extent.width), 220, kPanelWidth);
    const int h = std::clamp(int(0.36 * extent.height), 130, kPanelHeight);
    PanelHeader header{{int32_t(extent.width) - w - 6, int32_t(extent.height) - h - 6}, {0, 0}};
    panel_.assign(sizeof(header) / 4, 0);
    if (count >= 2 && w + 12 <= int(extent.width) && h + 12 <= int(extent.height)) {
      apps::Series curve{
          "", {steps.begin(), steps.begin() + count}, {losses.begin(), losses.begin() + count}};
      apps::PlotOptions plot{"", "step", "loss"};
      plot.width = w, plot.height = h, plot.log_y = true;
      try {
        const std::vector<apps::Rgb> pixels = apps::drawLinePlot({curve}, plot).pixels();
        header.size[0] = w, header.size[1] = h;
        for (const apps::Rgb& c : pixels)
          panel_.push_back(uint32_t(c.r) << 16 | uint32_t(c.g) << 8 | c.b);
      } catch (const std::runtime_error&) {
        // Nothing drawable on a log axis (every loss 0): no panel rather than no frame.
      }
    }
    std::memcpy(panel_.data(), &header, sizeof(header));
  }
  Frame& f = frames_in_flight_[frames_ % kFramesInFlight];
  if (f.panel_version != panel_version_) {  // this slot's last frame has finished with it
    std::memcpy(f.panel->data(), panel_.data(), 4 * panel_.size());
    f.panel_version = panel_version_;
  }
}

// The first frame to show an inference: its logits and loss become this family's (when the
// engine released them from another) and the loss is copied out for takeLoss().
void Renderer::takeResults(Frame& f) {
  if (scene_.acquire_from != VK_QUEUE_FAMILY_IGNORED) {
    // The new inference's results, released by the engine's family (Executor::releaseAfterStep),
    // become this family's before anything reads them; later frames read them as they are.
    const VkBufferMemoryBarrier acquire[] = {
        vk::acquireBarrier(scene_.logits, scene_.acquire_from, device_.queueFamily(),
                           VK_ACCESS_SHADER_READ_BIT),
        vk::acquireBarrier(scene_.loss, scene_.acquire_from, device_.queueFamily(),
                           VK_ACCESS_TRANSFER_READ_BIT)};
    const VkPipelineStageFlags stages =
        VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(f.cmd, stages, stages, 0, 0, nullptr, 2, acquire, 0, nullptr);
  }
  const VkBufferCopy region{scene_.loss.offset, 0, 4};
  vkCmdCopyBuffer(f.cmd, scene_.loss.buffer, f.loss->buffer(), 1, &region);
  VkBufferMemoryBarrier host{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
  host.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  host.dstAccessMask = VK_ACCESS_HOST_READ_BIT;  // read once the frame's fence has signalled
  host.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  host.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  host.buffer = f.loss->buffer();
  host.size = VK_WHOLE_SIZE;
  vkCmdPipelineBarrier(f.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0, 0,
                       nullptr, 1, &host, 0, nullptr);
  f.copied_loss = true;
}

void Renderer::record(Frame& f, uint32_t image, bool copy_loss, bool screenshot) {
  const VkExtent2D extent = swapchain_.extent();
  VK_CHECK(vkResetCommandBuffer(f.cmd, 0));
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(f.cmd, &begin));
  if (copy_loss) takeResults(f);  // after the engine's inference: the frame waits for it

  VkClearValue clear{};
  clear.color = {{0.1f, 0.1f, 0.1f, 1.0f}};
  VkRenderPassBeginInfo pass{VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO};
  pass.renderPass = screenshot ? swapchain_.renderPassForCopy() : swapchain_.renderPass();
  pass.framebuffer = swapchain_.framebuffer(image);
  pass.renderArea.extent = extent;
  pass.clearValueCount = 1;
  pass.pClearValues = &clear;
  vkCmdBeginRenderPass(f.cmd, &pass, VK_SUBPASS_CONTENTS_INLINE);
  const VkViewport viewport{0.0f, 0.0f, float(extent.width), float(extent.height), 0.0f, 1.0f};
  const VkRect2D scissor{{0, 0}, extent};
  vkCmdSetViewport(f.cmd, 0, 1, &viewport);
  vkCmdSetScissor(f.cmd, 0, 1, &scissor);
  const Plane& plane = scene_.plane;
  const Push push{{plane.left, plane.bottom, plane.right, plane.top},
                  {float(extent.width), float(extent.height)},
                  {uint32_t(scene_.grid_width), uint32_t(scene_.grid_height)},
                  logits_first_,
                  std::clamp(float(std::min(extent.width, extent.height)) / 120.0f, 2.0f, 6.0f)};
  vkCmdBindDescriptorSets(f.cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, layout_, 0, 1, &f.set, 0,
                          nullptr);
  vkCmdPushConstants(f.cmd, layout_, VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, 0,
                     sizeof(push), &push);
  vkCmdBindPipeline(f.cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, field_);
  vkCmdDraw(f.cmd, 3, 1, 0, 0);
  vkCmdBindPipeline(f.cmd, VK_PIPELINE_BIND_POINT_GRAPHICS, points_pipeline_);
  vkCmdDraw(f.cmd, 6, uint32_t(scene_.data->labels.size()), 0, 0);
  vkCmdEndRenderPass(f.cmd);

  if (screenshot) {  // the pass left the image as a copy source (its dependency covers it)
    VkBufferImageCopy region{};
    region.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1};
    region.imageExtent = {extent.width, extent.height, 1};
    vkCmdCopyImageToBuffer(f.cmd, swapchain_.image(image), VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                           readback_->buffer(), 1, &region);
    VkImageMemoryBarrier present{VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER};
    present.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL;  // after the copy's reads
    present.newLayout = VK_IMAGE_LAYOUT_PRESENT_SRC_KHR;
    present.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    present.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    present.image = swapchain_.image(image);
    present.subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
    VkBufferMemoryBarrier pixels{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
    pixels.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    pixels.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    pixels.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    pixels.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
    pixels.buffer = readback_->buffer();
    pixels.size = VK_WHOLE_SIZE;
    vkCmdPipelineBarrier(f.cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0,
                         nullptr, 1, &pixels, 1, &present);
  }
  VK_CHECK(vkEndCommandBuffer(f.cmd));
}

void Renderer::endFrame(VkSemaphore engine_timeline, uint64_t engine_value, bool copy_loss,
                        bool screenshot) {
  Frame& f = frames_in_flight_[frames_ % kFramesInFlight];
  if (screenshot) {
    const VkExtent2D extent = swapchain_.extent();
    const VkDeviceSize bytes = VkDeviceSize(extent.width) * extent.height * 4;
    if (!readback_ || readback_->bytes() != bytes) {
      waitForFrames();  // an earlier copy may still be in flight
      readback_ = std::make_unique<HostBuffer>(device_, bytes, VK_BUFFER_USAGE_TRANSFER_DST_BIT);
    }
    readback_extent_ = extent;
  }
  record(f, image_, copy_loss && engine_value, screenshot);

  // The image is written at colour output, after presentation let go of it; the logits are
  // read by the fragment shader (and the loss by a copy), after the engine's inference wrote
  // them.
  const VkSemaphore waits[] = {f.acquired, engine_timeline};
  const VkPipelineStageFlags stages[] = {
      VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT};
  const uint64_t wait_values[] = {0, engine_value};  // 0: ignored for the binary semaphore
  const VkSemaphore signals[] = {rendered_[image_], timeline_};
  const uint64_t signal_values[] = {0, frames_ + 1};
  VkTimelineSemaphoreSubmitInfo values{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  values.waitSemaphoreValueCount = engine_value ? 2 : 1;
  values.pWaitSemaphoreValues = wait_values;
  values.signalSemaphoreValueCount = 2;
  values.pSignalSemaphoreValues = signal_values;
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.pNext = &values;
  submit.waitSemaphoreCount = engine_value ? 2 : 1;
  submit.pWaitSemaphores = waits;
  submit.pWaitDstStageMask = stages;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &f.cmd;
  submit.signalSemaphoreCount = 2;
  submit.pSignalSemaphores = signals;
  VK_CHECK(vkResetFences(device_.device(), 1, &f.done));
  VK_CHECK(vkQueueSubmit(device_.queue(), 1, &submit, f.done));
  ++frames_;

  VkPresentInfoKHR present{VK_STRUCTURE_TYPE_PRESENT_INFO_KHR};
  present.waitSemaphoreCount = 1;
  present.pWaitSemaphores = &rendered_[image_];
  present.swapchainCount = 1;
  const VkSwapchainKHR swapchain = swapchain_.handle();
  present.pSwapchains = &swapchain;
  present.pImageIndices = &image_;
  const VkResult presented = vkQueuePresentKHR(device_.queue(), &present);
  if (presented == VK_ERROR_OUT_OF_DATE_KHR || presented == VK_SUBOPTIMAL_KHR)
    rebuildSwapchain();
  else
    VK_CHECK(presented);
}

void Renderer::screenshot(const std::filesystem::path& path) {
  if (!readback_) throw Error("no frame was copied for a screenshot");
  waitForFrames();
  const int w = int(readback_extent_.width), h = int(readback_extent_.height);
  const bool bgra = swapchain_.format() == VK_FORMAT_B8G8R8A8_UNORM;
  const auto* px = static_cast<const unsigned char*>(readback_->data());
  std::vector<apps::Rgb> rgb;
  rgb.reserve(size_t(w) * size_t(h));
  for (size_t i = 0; i < size_t(w) * size_t(h); ++i, px += 4)
    rgb.push_back(bgra ? apps::Rgb{px[2], px[1], px[0]} : apps::Rgb{px[0], px[1], px[2]});
  apps::Canvas canvas(w, h, {0, 0, 0});
  canvas.setPixels(rgb);
  apps::writePng(path, canvas);
}

}  // namespace vkgrad::play
