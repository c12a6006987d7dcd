#include "vkgrad/vk/memory.h"

#include <volk.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"

namespace vkgrad::vk {
namespace {

constexpr VkBufferUsageFlags kUsage =
    VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
    VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT | VK_BUFFER_USAGE_STORAGE_TEXEL_BUFFER_BIT |
    VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;

VkDeviceSize alignUp(VkDeviceSize value, VkDeviceSize alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// "64 MiB", "1.5 MiB", "12 KiB": whole MiB exactly, else KiB below 1 MiB, else a tenth.
std::string mib(VkDeviceSize bytes) {
  constexpr VkDeviceSize kMiB = VkDeviceSize(1) << 20;
  if (bytes % kMiB == 0) return std::to_string(bytes / kMiB) + " MiB";
  if (bytes < kMiB) return std::to_string((bytes + 1023) / 1024) + " KiB";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", double(bytes) / double(kMiB));
  return text;
}

// Every one of these is a format Vulkan requires uniform texel buffers to support.
VkFormat vkFormat(TexelFormat format) {
  switch (format) {
    case TexelFormat::R32f:
      return VK_FORMAT_R32_SFLOAT;
    case TexelFormat::Rgba32f:
      return VK_FORMAT_R32G32B32A32_SFLOAT;
    case TexelFormat::R32u:
      return VK_FORMAT_R32_UINT;
    case TexelFormat::Rgba32u:
      return VK_FORMAT_R32G32B32A32_UINT;
    case TexelFormat::R16u:
      return VK_FORMAT_R16_UINT;
    case TexelFormat::Rgba16u:
      return VK_FORMAT_R16G16B16A16_UINT;
  }
  return VK_FORMAT_UNDEFINED;
}

}  // namespace

const char* useName(Use use) {
  switch (use) {
    case Use::Parameters:
      return "parameters";
    case Use::Datasets:
      return "datasets";
    case Use::Activations:
      return "activations (graph arenas)";
    case Use::GraphState:
      return "graph state (optimizer moments, inputs, gradients)";
    default:
      return "other";
  }
}

uint32_t texelComponentBytes(TexelFormat format) {
  return format == TexelFormat::R16u || format == TexelFormat::Rgba16u ? 2 : 4;
}

uint32_t texelBytes(TexelFormat format) {
  const bool four = format == TexelFormat::Rgba32f || format == TexelFormat::Rgba32u ||
                    format == TexelFormat::Rgba16u;
  return texelComponentBytes(format) * (four ? 4 : 1);
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
    block_ = other.block_;
    handle_ = std::exchange(other.handle_, VK_NULL_HANDLE);
    offset_ = other.offset_;
    size_ = other.size_;
    capacity_ = other.capacity_;
    use_ = other.use_;
    views_ = std::move(other.views_);
    other.views_.clear();
  }
  return *this;
}

void Buffer::reset() {
  if (!owner_) return;
  const VolkDeviceTable& vk = owner_->context_.vk();
  for (const View& v : views_) vk.vkDestroyBufferView(owner_->context_.device(), v.view, nullptr);
  views_.clear();
  owner_->release(block_, offset_, capacity_, use_);
  owner_ = nullptr;
  handle_ = VK_NULL_HANDLE;
}

VkBufferView Buffer::texelView(TexelFormat format, VkDeviceSize byte_offset,
                               VkDeviceSize bytes) const {
  for (const View& v : views_)
    if (v.format == format && v.offset == byte_offset && v.bytes == bytes) return v.view;
  const Context& context = owner_->context_;
  const uint32_t texel = texelBytes(format);
  if (byte_offset + bytes > capacity_ || bytes % texel != 0 ||
      (offset_ + byte_offset) % context.info().min_texel_offset_alignment != 0)
    throw Error("texel view [" + std::to_string(byte_offset) + ", +" + std::to_string(bytes) +
                ") does not fit a " + std::to_string(capacity_) +
                "-byte buffer in whole, aligned texels");
  if (bytes / texel > context.info().max_texel_buffer_elements)
    throw Error("texel view of " + std::to_string(bytes / texel) +
                " texels exceeds the device's maxTexelBufferElements (" +
                std::to_string(context.info().max_texel_buffer_elements) + ")");
  VkBufferViewCreateInfo info{VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO};
  info.buffer = handle_;
  info.format = vkFormat(format);
  info.offset = offset_ + byte_offset;
  info.range = bytes;
  VkBufferView view;
  VK_CHECK(context.vk().vkCreateBufferView(context.device(), &info, nullptr, &view));
  views_.push_back({format, byte_offset, bytes, view});
  return view;
}

bool Buffer::grow(VkDeviceSize bytes) {
  if (!owner_) return false;
  Allocator& a = *owner_;
  const VkDeviceSize need = alignUp(bytes, a.alignment_);
  if (need > capacity_) {
    auto& free = a.blocks_[block_].free;
    const auto next = free.find(offset_ + capacity_);
    const VkDeviceSize extra = need - capacity_;
    if (next == free.end() || next->second < extra) return false;
    const VkDeviceSize left = next->second - extra;
    free.erase(next);
    if (left) free[offset_ + need] = left;
    capacity_ = need;
    a.in_use_ += extra;
    a.in_use_by_[size_t(use_)] += extra;
    a.peak_ = std::max(a.peak_, a.in_use_);
  }
  size_ = std::max(size_, bytes);
  return true;
}

Allocator::Allocator(Context& context, VkDeviceSize block_bytes)
    : context_(context), block_bytes_(block_bytes) {
  const DeviceInfo& info = context.info();
  if (info.max_allocation_bytes) block_bytes_ = std::min(block_bytes_, info.max_allocation_bytes);
  // One alignment serves every binding kind, and is at least a vec4 so that
  // RGBA32F views over float arrays of any length stay inside the range.
  alignment_ =
      std::max<VkDeviceSize>({256, info.min_storage_offset_alignment,
                              info.min_texel_offset_alignment, info.min_uniform_offset_alignment});
}

Allocator::~Allocator() {
  for (const Block& b : blocks_) {
    if (b.buffer) context_.vk().vkDestroyBuffer(context_.device(), b.buffer, nullptr);
    if (b.memory) context_.vk().vkFreeMemory(context_.device(), b.memory, nullptr);
  }
}

uint32_t Allocator::createBlock(VkDeviceSize bytes, VkDeviceSize request) {
  const VolkDeviceTable& vk = context_.vk();
  if (limit_) {
    const VkDeviceSize reserved = bytesReserved();
    if (reserved + bytes > limit_)
      throwVulkanError("vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY,
                       "a " + std::to_string(request) + "-byte buffer needs a " + mib(bytes) +
                           " block; " + mib(in_use_) + " in use (" + usageText() + ") and " +
                           mib(reserved) + " reserved of the " + mib(limit_) + " memory limit on " +
                           context_.info().name);
  }
  Block block;
  block.bytes = bytes;
  VkBufferCreateInfo buffer_info{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  buffer_info.size = bytes;
  buffer_info.usage = kUsage;
  shareWithFamilies(context_, buffer_info);
  VK_CHECK(vk.vkCreateBuffer(context_.device(), &buffer_info, nullptr, &block.buffer));

  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(context_.device(), block.buffer, &req);
  if (memory_type_ == UINT32_MAX) {
    VkPhysicalDeviceMemoryProperties props;
    vkGetPhysicalDeviceMemoryProperties(context_.physicalDevice(), &props);
    for (uint32_t i = 0; i < props.memoryTypeCount && memory_type_ == UINT32_MAX; ++i)
      if ((req.memoryTypeBits & (1u << i)) &&
          (props.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT))
        memory_type_ = i;
    for (uint32_t i = 0; i < props.memoryTypeCount && memory_type_ == UINT32_MAX; ++i)
      if (req.memoryTypeBits & (1u << i)) memory_type_ = i;
  }
  VkMemoryAllocateInfo alloc{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = memory_type_;
  VkResult result = vk.vkAllocateMemory(context_.device(), &alloc, nullptr, &block.memory);
  if (result != VK_SUCCESS) {
    vk.vkDestroyBuffer(context_.device(), block.buffer, nullptr);
    throwVulkanError("vkAllocateMemory", result,
                     "a " + mib(bytes) + " block for a " + std::to_string(request) +
                         "-byte buffer; " + mib(in_use_) + " already in use (" + usageText() +
                         ") on " + context_.info().name);
  }
  result = vk.vkBindBufferMemory(context_.device(), block.buffer, block.memory, 0);
  if (result != VK_SUCCESS) {
    vk.vkDestroyBuffer(context_.device(), block.buffer, nullptr);
    vk.vkFreeMemory(context_.device(), block.memory, nullptr);
    throwVulkanError("vkBindBufferMemory", result);
  }
  block.free[0] = bytes;
  for (uint32_t i = 0; i < blocks_.size(); ++i)
    if (blocks_[i].buffer == VK_NULL_HANDLE) {
      blocks_[i] = std::move(block);
      return i;
    }
  blocks_.push_back(std::move(block));
  return static_cast<uint32_t>(blocks_.size() - 1);
}

Buffer Allocator::allocate(VkDeviceSize bytes, Use use) {
  if (bytes == 0) throw Error("cannot allocate a buffer of 0 bytes");
  context_.checkNotLost("vkAllocateMemory");
  const VkDeviceSize need = alignUp(bytes, alignment_);
  const VkDeviceSize most = context_.info().max_allocation_bytes;
  if (most && need > most)
    throw Error("a " + std::to_string(bytes) + "-byte buffer (" + useName(use) +
                ") is larger than one allocation on " + context_.info().name +
                " may be (maxMemoryAllocationSize " + std::to_string(most) + " bytes)");
  auto take = [&](uint32_t b) -> Buffer {
    auto& free = blocks_[b].free;
    for (auto it = free.begin(); it != free.end(); ++it) {
      if (it->second < need) continue;  // first fit; offsets stay aligned since sizes are
      const VkDeviceSize offset = it->first, left = it->second - need;
      free.erase(it);
      if (left) free[offset + need] = left;
      Buffer buffer;
      buffer.owner_ = this;
      buffer.block_ = b;
      buffer.handle_ = blocks_[b].buffer;
      buffer.offset_ = offset;
      buffer.size_ = bytes;
      buffer.capacity_ = need;
      buffer.use_ = use;
      in_use_ += need;
      in_use_by_[size_t(use)] += need;
      peak_ = std::max(peak_, in_use_);
      return buffer;
    }
    return {};
  };
  if (need <= block_bytes_) {
    for (uint32_t b = 0; b < blocks_.size(); ++b)
      if (blocks_[b].buffer && blocks_[b].bytes == block_bytes_)
        if (Buffer buffer = take(b)) return buffer;
    // Under a limit with less than a whole block left, the request gets a block of its own.
    if (limit_ && bytesReserved() + block_bytes_ > limit_) return take(createBlock(need, bytes));
    return take(createBlock(block_bytes_, bytes));
  }
  return take(createBlock(need, bytes));  // a dedicated block, freed with the buffer
}

void Allocator::release(uint32_t b, VkDeviceSize offset, VkDeviceSize bytes, Use use) {
  Block& block = blocks_[b];
  in_use_ -= bytes;
  in_use_by_[size_t(use)] -= bytes;
  auto [it, inserted] = block.free.emplace(offset, bytes);
  // Coalesce with the free neighbours on both sides.
  if (auto next = std::next(it);
      next != block.free.end() && it->first + it->second == next->first) {
    it->second += next->second;
    block.free.erase(next);
  }
  if (it != block.free.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      block.free.erase(it);
    }
  }
  // Dedicated blocks are returned to the device as soon as they are empty.
  if (block.bytes != block_bytes_ && block.free.size() == 1 &&
      block.free.begin()->second == block.bytes) {
    context_.vk().vkDestroyBuffer(context_.device(), block.buffer, nullptr);
    context_.vk().vkFreeMemory(context_.device(), block.memory, nullptr);
    block = Block{};
  }
}

std::string Allocator::usageText() const {
  std::string text;
  for (size_t u = 0; u < in_use_by_.size(); ++u)
    if (in_use_by_[u])
      text += (text.empty() ? "" : ", ") + std::string(useName(Use(u))) + " " + mib(in_use_by_[u]);
  return text.empty() ? "nothing" : text;
}

VkDeviceSize Allocator::bytesReserved() const {
  VkDeviceSize total = 0;
  for (const Block& b : blocks_) total += b.bytes;
  return total;
}

size_t Allocator::blockCount() const {
  return std::count_if(blocks_.begin(), blocks_.end(), [](const Block& b) { return b.buffer; });
}

void shareWithFamilies(const Context& context, VkBufferCreateInfo& info) {
  const std::vector<uint32_t>& families = context.concurrentFamilies();
  info.sharingMode = families.empty() ? VK_SHARING_MODE_EXCLUSIVE : VK_SHARING_MODE_CONCURRENT;
  info.queueFamilyIndexCount = uint32_t(families.size());
  info.pQueueFamilyIndices = families.empty() ? nullptr : families.data();
}

}  // namespace vkgrad::vk
