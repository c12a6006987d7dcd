#include "vkgrad/vk/staging.h"

#include <volk.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::vk {
namespace {

void checkRange(const char* what, const Buffer& buffer, VkDeviceSize offset, VkDeviceSize bytes) {
  if (!buffer) throw Error(std::string(what) + ": the buffer is empty");
  if (offset > buffer.size() || bytes > buffer.size() - offset)
    throw Error(std::string(what) + " of " + std::to_string(bytes) + " bytes at offset " +
                std::to_string(offset) + " does not fit a " + std::to_string(buffer.size()) +
                "-byte buffer");
}

// Previous submissions' shader and transfer writes become visible to this one's
// transfers, and this one's transfer writes to later shaders, transfers and the host.
void fullBarrier(const VolkDeviceTable& vk, VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                          VK_ACCESS_HOST_READ_BIT;
  vk.vkCmdPipelineBarrier(cmd,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                              VK_PIPELINE_STAGE_HOST_BIT,
                          0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

Staging::Mapped Staging::createMapped(VkDeviceSize bytes) {
  const VolkDeviceTable& vk = context_.vk();
  VkDevice device = context_.device();
  Mapped m;
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer_info.size = bytes;
  buffer_info.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  shareWithFamilies(context_, buffer_info);
  VK_CHECK(vk.vkCreateBuffer(device, &buffer_info, nullptr, &m.buffer));
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(device, m.buffer, &req);

  // Host-visible; cached if possible, since downloads read it from the CPU.
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(context_.physicalDevice(), &props);
  uint32_t type = UINT32_MAX;
  for (VkMemoryPropertyFlags wanted :
       {VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                              VK_MEMORY_PROPERTY_HOST_CACHED_BIT),
        VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                              VK_MEMORY_PROPERTY_HOST_COHERENT_BIT),
        VkMemoryPropertyFlags(VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT)}) {
    for (uint32_t i = 0; i < props.memoryTypeCount && type == UINT32_MAX; ++i)
      if ((req.memoryTypeBits & (1u << i)) &&
          (props.memoryTypes[i].propertyFlags & wanted) == wanted)
        type = i;
    if (type != UINT32_MAX) break;
  }
  if (type == UINT32_MAX) {
    vk.vkDestroyBuffer(device, m.buffer, nullptr);
    throw Error("the device has no host-visible memory for staging");
  }
  m.coherent = props.memoryTypes[type].propertyFlags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = type;
  if (const VkResult r = vk.vkAllocateMemory(device, &alloc, nullptr, &m.memory); r != VK_SUCCESS) {
    vk.vkDestroyBuffer(device, m.buffer, nullptr);
    VK_CHECK(r);
  }
  VK_CHECK(vk.vkBindBufferMemory(device, m.buffer, m.memory, 0));
  VK_CHECK(vk.vkMapMemory(device, m.memory, 0, VK_WHOLE_SIZE, 0, &m.data));
  return m;
}

void Staging::flush(const Mapped& m) {
  if (m.coherent) return;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, m.memory, 0,
                            VK_WHOLE_SIZE};
  VK_CHECK(context_.vk().vkFlushMappedMemoryRanges(context_.device(), 1, &range));
}

Staging::Staging(Context& context, VkDeviceSize bytes) : context_(context), bytes_(bytes) {
  // Transfers go through it in pieces, so it can be as small as one allocation may be.
  if (context.info().max_allocation_bytes)
    bytes_ = std::min(bytes_, context.info().max_allocation_bytes);
  const VolkDeviceTable& vk = context.vk();
  VkDevice device = context.device();
  staging_ = createMapped(bytes_);
  try {
    ring_ = createMapped(kRingSlots * kSlotBytes);
  } catch (...) {  // the destructor does not run for a constructor that throws
    vk.vkDestroyBuffer(device, staging_.buffer, nullptr);
    vk.vkFreeMemory(device, staging_.memory, nullptr);
    throw;
  }

  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool_info.queueFamilyIndex = context.queueFamily();
  VK_CHECK(vk.vkCreateCommandPool(device, &pool_info, nullptr, &pool_));
  VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmd_info.commandPool = pool_;
  cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmd_info.commandBufferCount = 1;
  VK_CHECK(vk.vkAllocateCommandBuffers(device, &cmd_info, &cmd_));
  cmd_info.commandBufferCount = kRingSlots;
  VK_CHECK(vk.vkAllocateCommandBuffers(device, &cmd_info, ring_cmd_));
}

Staging::~Staging() {
  const VolkDeviceTable& vk = context_.vk();
  VkDevice device = context_.device();
  vk.vkDestroyCommandPool(device, pool_, nullptr);
  for (const Mapped* m : {&staging_, &ring_}) {
    vk.vkDestroyBuffer(device, m->buffer, nullptr);
    vk.vkFreeMemory(device, m->memory, nullptr);  // unmaps too
  }
}

void Staging::settle() {
  context_.wait(in_flight_);
  in_flight_ = 0;
}

uint64_t Staging::submitCopy(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize src_offset,
                             VkBuffer dst, VkDeviceSize dst_offset, VkDeviceSize bytes) {
  const VolkDeviceTable& vk = context_.vk();
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vk.vkBeginCommandBuffer(cmd, &begin));
  fullBarrier(vk, cmd);  // earlier work's writes reach the copy; it overwrites no pending read
  VkBufferCopy copy{src_offset, dst_offset, bytes};
  vk.vkCmdCopyBuffer(cmd, src, dst, 1, &copy);
  fullBarrier(vk, cmd);  // the copy reaches later shaders, transfers and host reads
  VK_CHECK(vk.vkEndCommandBuffer(cmd));
  return context_.submit(cmd);
}

void Staging::copy(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset,
                   VkDeviceSize bytes, bool wait) {
  const uint64_t value = submitCopy(cmd_, src, src_offset, dst, dst_offset, bytes);
  if (wait) {
    context_.wait(value);
  } else {
    in_flight_ = value;
  }
}

void Staging::upload(const Buffer& dst, VkDeviceSize dst_offset, const void* src,
                     VkDeviceSize bytes) {
  upload(dst, dst_offset, src, bytes, true);
}

void Staging::uploadAsync(const Buffer& dst, VkDeviceSize dst_offset, const void* src,
                          VkDeviceSize bytes) {
  if (bytes == 0 || bytes > kSlotBytes) {
    upload(dst, dst_offset, src, bytes, bytes > bytes_);
    return;
  }
  checkRange("upload", dst, dst_offset, bytes);
  counts_.uploads += 1;
  counts_.upload_bytes += bytes;
  const int slot = ring_next_;
  ring_next_ = (ring_next_ + 1) % kRingSlots;
  context_.wait(ring_in_flight_[slot]);  // the slot's copy of kRingSlots uploads ago
  const VkDeviceSize at = VkDeviceSize(slot) * kSlotBytes;
  std::memcpy(static_cast<char*>(ring_.data) + at, src, bytes);
  flush(ring_);
  ring_in_flight_[slot] =
      submitCopy(ring_cmd_[slot], ring_.buffer, at, dst.handle(), dst.offset() + dst_offset, bytes);
}

void Staging::upload(const Buffer& dst, VkDeviceSize dst_offset, const void* src,
                     VkDeviceSize bytes, bool wait) {
  checkRange("upload", dst, dst_offset, bytes);
  counts_.uploads += bytes > 0;
  counts_.upload_bytes += bytes;
  for (VkDeviceSize done = 0; done < bytes;) {
    const VkDeviceSize chunk = std::min(bytes_, bytes - done);
    settle();
    std::memcpy(staging_.data, static_cast<const char*>(src) + done, chunk);
    flush(staging_);
    copy(staging_.buffer, 0, dst.handle(), dst.offset() + dst_offset + done, chunk, wait);
    done += chunk;
  }
}

void Staging::download(const Buffer& src, VkDeviceSize src_offset, void* dst, VkDeviceSize bytes) {
  checkRange("download", src, src_offset, bytes);
  counts_.downloads += bytes > 0;
  counts_.download_bytes += bytes;
  const VolkDeviceTable& vk = context_.vk();
  for (VkDeviceSize done = 0; done < bytes;) {
    const VkDeviceSize chunk = std::min(bytes_, bytes - done);
    settle();
    copy(src.handle(), src.offset() + src_offset + done, staging_.buffer, 0, chunk, true);
    if (!staging_.coherent) {
      VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE, nullptr, staging_.memory, 0,
                                VK_WHOLE_SIZE};
      VK_CHECK(vk.vkInvalidateMappedMemoryRanges(context_.device(), 1, &range));
    }
    std::memcpy(static_cast<char*>(dst) + done, staging_.data, chunk);
    done += chunk;
  }
}

}  // namespace vkgrad::vk
