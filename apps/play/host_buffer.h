// A buffer in host-visible, coherent memory, mapped for its whole life: the app's small
// inputs to its shaders (the data points, the loss panel's pixels) and the screenshot's readback.
#pragma once

#include "play/device.h"

namespace vkgrad::play {

class HostBuffer {
 public:
  // Throws VulkanError when the device has no room.
  HostBuffer(const Device& device, VkDeviceSize bytes, VkBufferUsageFlags usage);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  VkBuffer buffer() const { return buffer_; }
  VkDeviceSize bytes() const { return bytes_; }
  void* data() const { return data_; }  // coherent: writes need no flush, reads no invalidate

 private:
  void release();

  VkDevice device_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  VkDeviceSize bytes_;
  void* data_ = nullptr;
};

}  // namespace vkgrad::play
