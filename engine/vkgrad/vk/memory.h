// Device-local buffers, sub-allocated from large blocks (there is no VMA in Debian).
// Each block is one VkDeviceMemory with one VkBuffer over all of it; a Buffer is an
// aligned range of a block, so binding it means (block buffer, offset, size).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vkgrad/vk/vulkan.h"

namespace vkgrad::vk {

class Context;
class Allocator;

// What a buffer holds, so that running out of memory can say what the memory went to.
enum class Use : uint8_t {
  Other,
  Parameters,   // ParameterStore
  Datasets,     // uploaded once, gathered from by training graphs
  Activations,  // a compiled graph's arena
  GraphState,   // a compiled graph's persistent tensors: optimizer moments, inputs, gradients
  kCount
};
const char* useName(Use use);

// Texel formats a buffer may be viewed as by a uniform texel buffer binding: f32 values, and
// unsigned 32- and 16-bit words (a kernel's 16-bit build reads every float format as bits).
enum class TexelFormat { R32f, Rgba32f, R32u, Rgba32u, R16u, Rgba16u };
uint32_t texelBytes(TexelFormat format);
// The bytes of one component: 4, or 2 for R16u and Rgba16u.
uint32_t texelComponentBytes(TexelFormat format);

// A device-local range; move-only, returned to its block on destruction.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { reset(); }

  VkBuffer handle() const { return handle_; }
  VkDeviceSize offset() const { return offset_; }  // into handle()
  VkDeviceSize size() const { return size_; }      // bytes asked for
  // Bytes that may be addressed: size() rounded up to the allocator's alignment (>= 16),
  // so a vec4 view over a float array of any length stays in bounds.
  VkDeviceSize capacity() const { return capacity_; }
  Use use() const { return use_; }
  explicit operator bool() const { return handle_ != VK_NULL_HANDLE; }

  // Grows this buffer to `bytes` in place, keeping its contents and offset, if its block has
  // that much free right after it; returns false (nothing changed) otherwise.
  bool grow(VkDeviceSize bytes);

  // A view of [byte_offset, byte_offset + bytes) of this buffer; cached, destroyed with it.
  VkBufferView texelView(TexelFormat format, VkDeviceSize byte_offset, VkDeviceSize bytes) const;

  void reset();

 private:
  friend class Allocator;
  struct View {
    TexelFormat format;
    VkDeviceSize offset, bytes;
    VkBufferView view;
  };
  Allocator* owner_ = nullptr;
  uint32_t block_ = 0;
  VkBuffer handle_ = VK_NULL_HANDLE;
  VkDeviceSize offset_ = 0, size_ = 0, capacity_ = 0;
  Use use_ = Use::Other;
  mutable std::vector<View> views_;
};

class Allocator {
 public:
  // block_bytes: size of each shared block; larger requests get a block of their own.
  explicit Allocator(Context& context, VkDeviceSize block_bytes = VkDeviceSize(64) << 20);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  // bytes >= 1. Throws OutOfMemoryError when the device (or the limit) has no room, saying
  // how much was asked and what the memory in use holds; the allocator is then as it was.
  // Throws Error for more than one allocation may be (DeviceInfo::max_allocation_bytes):
  // callers split what may be large (runtime/executor.cpp) or name what they were allocating.
  Buffer allocate(VkDeviceSize bytes, Use use = Use::Other);

  VkDeviceSize alignment() const { return alignment_; }
  VkDeviceSize bytesInUse() const { return in_use_; }
  VkDeviceSize bytesInUse(Use use) const { return in_use_by_[size_t(use)]; }
  // "parameters 12 MiB, activations 40 MiB, ..." (the uses holding any memory), or "nothing".
  std::string usageText() const;
  // The most bytes in use at once since creation or the last resetPeak(): what a workload
  // needed, measured by allocating it (vkgrad-bench's device_bytes).
  VkDeviceSize peakBytesInUse() const { return peak_; }
  void resetPeak() { peak_ = in_use_; }
  VkDeviceSize bytesReserved() const;  // sum of block sizes
  size_t blockCount() const;
  // At most `bytes` of blocks from now on (0: no limit beyond the device's); an allocation
  // that would pass it throws OutOfMemoryError and leaves the allocator as it was.
  void setLimit(VkDeviceSize bytes) { limit_ = bytes; }
  VkDeviceSize limit() const { return limit_; }

 private:
  friend class Buffer;
  struct Block {
    VkDeviceMemory memory = VK_NULL_HANDLE;
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceSize bytes = 0;
    std::map<VkDeviceSize, VkDeviceSize> free;  // offset -> size, coalesced
  };
  uint32_t createBlock(VkDeviceSize bytes, VkDeviceSize request);
  void release(uint32_t block, VkDeviceSize offset, VkDeviceSize bytes, Use use);

  Context& context_;
  VkDeviceSize block_bytes_;
  VkDeviceSize alignment_;
  VkDeviceSize in_use_ = 0;
  std::array<VkDeviceSize, size_t(Use::kCount)> in_use_by_{};
  VkDeviceSize peak_ = 0;
  VkDeviceSize limit_ = 0;
  uint32_t memory_type_ = UINT32_MAX;
  std::vector<Block> blocks_;  // a freed dedicated block leaves an empty slot
};

// Every buffer the engine creates is shared as the Context says (Context::concurrentFamilies):
// VK_SHARING_MODE_CONCURRENT over those families, else exclusive to the engine's.
void shareWithFamilies(const Context& context, VkBufferCreateInfo& info);

}  // namespace vkgrad::vk
