#include "play/host_buffer.h"

namespace vkgrad::play {

HostBuffer::HostBuffer(const Device& device, VkDeviceSize bytes, VkBufferUsageFlags usage)
    : device_(device.device()), bytes_(bytes) {
  VkBufferCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  info.size = bytes;
  info.usage = usage;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VK_CHECK(vkCreateBuffer(device_, &info, nullptr, &buffer_));
  try {
    VkMemoryRequirements needs;
    vkGetBufferMemoryRequirements(device_, buffer_, &needs);
    VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    allocate.allocationSize = needs.size;
    allocate.memoryTypeIndex =
        device.memoryType(needs.memoryTypeBits, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                                    VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    VK_CHECK(vkAllocateMemory(device_, &allocate, nullptr, &memory_));
    VK_CHECK(vkBindBufferMemory(device_, buffer_, memory_, 0));
    VK_CHECK(vkMapMemory(device_, memory_, 0, VK_WHOLE_SIZE, 0, &data_));
  } catch (...) {
    release();
    throw;
  }
}

HostBuffer::~HostBuffer() {
  release();
}

void HostBuffer::release() {
  if (memory_) vkFreeMemory(device_, memory_, nullptr);  // unmaps too
  if (buffer_) vkDestroyBuffer(device_, buffer_, nullptr);
}

}  // namespace vkgrad::play
