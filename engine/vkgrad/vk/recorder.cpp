#include "vkgrad/vk/recorder.h"

#include <volk.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/kernel.h"

namespace vkgrad::vk {
namespace {

constexpr uint32_t kSetsPerPool = 256;
constexpr uint32_t kMaxTimestamps = 4096;  // enough for a profiled graph (one per node)

// Every shader and transfer write before it is visible to every shader and transfer access
// after it: the one barrier the recorder places (between dependent dispatches).
void memoryBarrier(const VolkDeviceTable& vk, VkCommandBuffer cmd) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  vk.vkCmdPipelineBarrier(cmd, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

VkDeviceSize resolveBytes(const Buffer& buffer, VkDeviceSize offset, VkDeviceSize bytes,
                          const char* what) {
  if (!buffer) throw Error(std::string(what) + ": the buffer is empty");
  if (offset > buffer.size())
    throw Error(std::string(what) + ": offset past the end of the buffer");
  if (bytes == 0) bytes = buffer.size() - offset;
  if (bytes > buffer.size() - offset)
    throw Error(std::string(what) + ": range of " + std::to_string(bytes) + " bytes at " +
                std::to_string(offset) + " overruns a " + std::to_string(buffer.size()) +
                "-byte buffer");
  return bytes;
}

bool overlaps(const auto& a, const auto& b) {
  return a.buffer == b.buffer && a.begin < b.end && b.begin < a.end;
}

}  // namespace

Recorder::Recorder(Context& context) : context_(context) {
  const VolkDeviceTable& vk = context.vk();
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = context.queueFamily();
  VK_CHECK(vk.vkCreateCommandPool(context.device(), &pool_info, nullptr, &pool_));
  VkCommandBufferAllocateInfo cmd_info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cmd_info.commandPool = pool_;
  cmd_info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cmd_info.commandBufferCount = 1;
  VK_CHECK(vk.vkAllocateCommandBuffers(context.device(), &cmd_info, &cmd_));
  begin();
}

Recorder::~Recorder() {
  const VolkDeviceTable& vk = context_.vk();
  VkDevice device = context_.device();
  // Nothing recorded here may still be running when it is destroyed (a lost device runs
  // nothing more).
  if (!context_.lost()) {
    try {
      context_.wait(in_flight_);
    } catch (const Error&) {  // lost while waiting: nothing runs any more either
    }
  }
  for (VkDescriptorPool p : descriptor_pools_) vk.vkDestroyDescriptorPool(device, p, nullptr);
  if (queries_) vk.vkDestroyQueryPool(device, queries_, nullptr);
  vk.vkDestroyCommandPool(device, pool_, nullptr);
}

void Recorder::begin() {
  const VolkDeviceTable& vk = context_.vk();
  VkCommandBufferBeginInfo info{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VK_CHECK(vk.vkBeginCommandBuffer(cmd_, &info));
  recording_ = true;
  // Writes of earlier submissions (uploads, other recorders) become visible to this one.
  memoryBarrier(vk, cmd_);
}

void Recorder::requireRecording(const char* what) const {
  if (!recording_)
    throw Error(std::string("Recorder::") + what + " after submit(): call reset() to record anew");
}

void Recorder::track(std::span<const Range> reads, std::span<const Range> writes) {
  bool hazard = false;
  for (const Range& r : reads)
    for (const Range& w : written_) hazard |= overlaps(r, w);  // read after write
  for (const Range& w : writes) {
    for (const Range& prev : written_) hazard |= overlaps(w, prev);  // write after write
    for (const Range& prev : read_) hazard |= overlaps(w, prev);     // write after read
  }
  if (hazard) {
    memoryBarrier(context_.vk(), cmd_);
    written_.clear();
    read_.clear();
    ++barriers_;
  }
  read_.insert(read_.end(), reads.begin(), reads.end());
  written_.insert(written_.end(), writes.begin(), writes.end());
}

VkDescriptorSet Recorder::allocateSet(const Kernel& kernel) {
  const VolkDeviceTable& vk = context_.vk();
  VkDescriptorSetAllocateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  info.descriptorSetCount = 1;
  VkDescriptorSetLayout layout = kernel.setLayout();
  info.pSetLayouts = &layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  if (!descriptor_pools_.empty()) {
    info.descriptorPool = descriptor_pools_.back();
    VkResult result = vk.vkAllocateDescriptorSets(context_.device(), &info, &set);
    if (result == VK_SUCCESS) return set;
    if (result != VK_ERROR_OUT_OF_POOL_MEMORY && result != VK_ERROR_FRAGMENTED_POOL)
      throwVulkanError("vkAllocateDescriptorSets", result);
  }
  // A fresh pool sized for kSetsPerPool dispatches of up to 8 bindings each.
  const VkDescriptorPoolSize sizes[] = {
      {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, kSetsPerPool * 8},
      {VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, kSetsPerPool * 2},
      {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER, kSetsPerPool * 4},
      {VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER, kSetsPerPool * 2},
  };
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.maxSets = kSetsPerPool;
  pool_info.poolSizeCount = 4;
  pool_info.pPoolSizes = sizes;
  VkDescriptorPool pool;
  VK_CHECK(vk.vkCreateDescriptorPool(context_.device(), &pool_info, nullptr, &pool));
  descriptor_pools_.push_back(pool);
  info.descriptorPool = pool;
  VK_CHECK(vk.vkAllocateDescriptorSets(context_.device(), &info, &set));
  return set;
}

void Recorder::dispatch(const Kernel& kernel, std::span<const Arg> args, const void* push,
                        uint32_t push_bytes, uint64_t tx, uint64_t ty, uint64_t tz) {
  dispatchGroups(kernel, args, push, push_bytes, divUp(tx, kernel.localSize(0)),
                 divUp(ty, kernel.localSize(1)), divUp(tz, kernel.localSize(2)));
}

void Recorder::dispatchGroups(const Kernel& kernel, std::span<const Arg> args, const void* push,
                              uint32_t push_bytes, uint32_t gx, uint32_t gy, uint32_t gz) {
  requireRecording("dispatch");
  const DeviceInfo& info = context_.info();
  const std::string what = "kernel '" + kernel.name() + "'";
  const auto& bindings = kernel.bindings();
  if (args.size() != bindings.size())
    throw Error(what + " takes " + std::to_string(bindings.size()) + " bindings, got " +
                std::to_string(args.size()));
  if (push_bytes > kMaxPushConstantBytes)
    throw Error(what + ": " + std::to_string(push_bytes) + " bytes of push constants (max 128)");
  const uint32_t groups[3] = {gx, gy, gz};
  for (int axis = 0; axis < 3; ++axis)
    if (groups[axis] == 0 || groups[axis] > info.max_workgroup_count[axis])
      throw Error(what + ": " + std::to_string(groups[axis]) + " workgroups on axis " +
                  std::to_string(axis) + " (device allows 1.." +
                  std::to_string(info.max_workgroup_count[axis]) + ")");

  std::vector<VkDescriptorBufferInfo> buffer_infos(args.size());
  std::vector<VkBufferView> views(args.size());
  std::vector<VkWriteDescriptorSet> writes(args.size());
  std::vector<Range> reads, written;
  const VkDescriptorSet set = allocateSet(kernel);
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg& arg = args[i];
    const BindingInfo& b = bindings[i];
    const std::string slot = what + " binding " + std::to_string(i);
    VkDeviceSize bytes = resolveBytes(*arg.buffer, arg.offset, arg.bytes, slot.c_str());
    VkWriteDescriptorSet& w = writes[i];
    w = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    w.dstSet = set;
    w.dstBinding = b.binding;
    w.descriptorCount = 1;
    if (b.kind == BindingKind::UniformTexelBuffer || b.kind == BindingKind::StorageTexelBuffer) {
      // Round up to whole texels; Buffer::capacity() keeps the tail in bounds.
      const uint32_t texel = texelBytes(arg.texel);
      bytes = (bytes + texel - 1) / texel * texel;
      views[i] = arg.buffer->texelView(arg.texel, arg.offset, bytes);
      w.descriptorType = b.kind == BindingKind::UniformTexelBuffer
                             ? VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER
                             : VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
      w.pTexelBufferView = &views[i];
    } else {
      const VkDeviceSize align = b.kind == BindingKind::StorageBuffer
                                     ? info.min_storage_offset_alignment
                                     : info.min_uniform_offset_alignment;
      if ((arg.buffer->offset() + arg.offset) % align != 0)
        throw Error(slot + ": offset " + std::to_string(arg.offset) + " is not a multiple of " +
                    std::to_string(align));
      if (bytes > info.max_storage_buffer_range)
        throw Error(slot + ": " + std::to_string(bytes) +
                    " bytes exceed the device's maxStorageBufferRange (" +
                    std::to_string(info.max_storage_buffer_range) + ")");
      buffer_infos[i] = {arg.buffer->handle(), arg.buffer->offset() + arg.offset, bytes};
      w.descriptorType = b.kind == BindingKind::StorageBuffer ? VK_DESCRIPTOR_TYPE_STORAGE_BUFFER
                                                              : VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
      w.pBufferInfo = &buffer_infos[i];
    }
    const Range range{arg.buffer->handle(), arg.buffer->offset() + arg.offset,
                      arg.buffer->offset() + arg.offset + bytes};
    (b.writes ? written : reads).push_back(range);
  }
  const VolkDeviceTable& vk = context_.vk();
  vk.vkUpdateDescriptorSets(context_.device(), static_cast<uint32_t>(writes.size()), writes.data(),
                            0, nullptr);
  track(reads, written);
  vk.vkCmdBindPipeline(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipeline());
  vk.vkCmdBindDescriptorSets(cmd_, VK_PIPELINE_BIND_POINT_COMPUTE, kernel.pipelineLayout(), 0, 1,
                             &set, 0, nullptr);
  if (push_bytes)
    vk.vkCmdPushConstants(cmd_, kernel.pipelineLayout(), VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes,
                          push);
  vk.vkCmdDispatch(cmd_, gx, gy, gz);
  ++dispatches_;
}

void Recorder::fill(const Buffer& buffer, uint32_t word, VkDeviceSize offset, VkDeviceSize bytes) {
  requireRecording("fill");
  bytes = resolveBytes(buffer, offset, bytes, "fill");
  if (offset % 4 || bytes % 4) throw Error("fill: offset and size must be multiples of 4 bytes");
  const Range range{buffer.handle(), buffer.offset() + offset, buffer.offset() + offset + bytes};
  track({}, std::span(&range, 1));
  context_.vk().vkCmdFillBuffer(cmd_, buffer.handle(), buffer.offset() + offset, bytes, word);
}

void Recorder::release(const Buffer& buffer, VkDeviceSize offset, VkDeviceSize bytes,
                       uint32_t family) {
  requireRecording("release");
  bytes = resolveBytes(buffer, offset, bytes, "release");
  if (family == context_.queueFamily() || !context_.concurrentFamilies().empty()) return;
  VkBufferMemoryBarrier barrier{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = 0;  // ignored by a release
  barrier.srcQueueFamilyIndex = context_.queueFamily();
  barrier.dstQueueFamilyIndex = family;
  barrier.buffer = buffer.handle();
  barrier.offset = buffer.offset() + offset;
  barrier.size = bytes;
  context_.vk().vkCmdPipelineBarrier(
      cmd_, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
      VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, nullptr, 1, &barrier, 0, nullptr);
  ++barriers_;
}

void Recorder::copy(const Buffer& src, VkDeviceSize src_offset, const Buffer& dst,
                    VkDeviceSize dst_offset, VkDeviceSize bytes) {
  requireRecording("copy");
  resolveBytes(src, src_offset, bytes, "copy source");
  resolveBytes(dst, dst_offset, bytes, "copy destination");
  const Range read{src.handle(), src.offset() + src_offset, src.offset() + src_offset + bytes};
  const Range write{dst.handle(), dst.offset() + dst_offset, dst.offset() + dst_offset + bytes};
  track(std::span(&read, 1), std::span(&write, 1));
  VkBufferCopy region{src.offset() + src_offset, dst.offset() + dst_offset, bytes};
  context_.vk().vkCmdCopyBuffer(cmd_, src.handle(), dst.handle(), 1, &region);
}

void Recorder::update(const Buffer& buffer, VkDeviceSize offset, const void* data,
                      VkDeviceSize bytes) {
  requireRecording("update");
  if (bytes == 0) throw Error("update: no bytes");
  resolveBytes(buffer, offset, bytes, "update");
  if (offset % 4 || bytes % 4) throw Error("update: offset and size must be multiples of 4 bytes");
  const Range range{buffer.handle(), buffer.offset() + offset, buffer.offset() + offset + bytes};
  track({}, std::span(&range, 1));
  constexpr VkDeviceSize kPiece = 65536;  // vkCmdUpdateBuffer's limit
  const auto* bytes_in = static_cast<const uint8_t*>(data);
  for (VkDeviceSize at = 0; at < bytes; at += kPiece)
    context_.vk().vkCmdUpdateBuffer(cmd_, buffer.handle(), buffer.offset() + offset + at,
                                    std::min(kPiece, bytes - at), bytes_in + at);
}

uint32_t Recorder::timestamp() {
  requireRecording("timestamp");
  const VolkDeviceTable& vk = context_.vk();
  if (context_.info().timestamp_valid_bits == 0)
    throw Error("the compute queue of " + context_.info().name + " has no timestamps");
  if (!queries_) {
    VkQueryPoolCreateInfo info{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    info.queryType = VK_QUERY_TYPE_TIMESTAMP;
    info.queryCount = kMaxTimestamps;
    VK_CHECK(vk.vkCreateQueryPool(context_.device(), &info, nullptr, &queries_));
  }
  if (query_count_ == 0) vk.vkCmdResetQueryPool(cmd_, queries_, 0, kMaxTimestamps);
  if (query_count_ == kMaxTimestamps)
    throw Error("more than " + std::to_string(kMaxTimestamps) + " timestamps in one recording");
  vk.vkCmdWriteTimestamp(cmd_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, query_count_);
  return query_count_++;
}

uint64_t Recorder::submitAsync(std::span<const SemaphoreWait> waits,
                               std::span<const SemaphoreSignal> signals) {
  const VolkDeviceTable& vk = context_.vk();
  if (recording_) {
    VK_CHECK(vk.vkEndCommandBuffer(cmd_));
    recording_ = false;
  }
  context_.wait(in_flight_);  // a command buffer is submitted again only once it has finished
  query_results_.clear();     // timestamps are read by submit() only
  in_flight_ = context_.submit(cmd_, waits, signals);
  return in_flight_;
}

bool Recorder::busy() const { return !context_.finished(in_flight_); }

void Recorder::wait() { context_.wait(in_flight_); }

void Recorder::submit() {
  submitAsync();
  readTimestamps();
}

void Recorder::readTimestamps() {
  const VolkDeviceTable& vk = context_.vk();
  if (in_flight_ == 0) return;  // never submitted: no timestamps to read
  context_.wait(in_flight_);
  if (query_count_) {
    query_results_.resize(query_count_);
    VK_CHECK(vk.vkGetQueryPoolResults(context_.device(), queries_, 0, query_count_,
                                      query_count_ * sizeof(uint64_t), query_results_.data(),
                                      sizeof(uint64_t),
                                      VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
  }
}

void Recorder::reset() {
  const VolkDeviceTable& vk = context_.vk();
  wait();
  if (recording_) VK_CHECK(vk.vkEndCommandBuffer(cmd_));
  VK_CHECK(vk.vkResetCommandPool(context_.device(), pool_, 0));
  // Keep one pool (allocation only ever draws from the last one).
  while (descriptor_pools_.size() > 1) {
    vk.vkDestroyDescriptorPool(context_.device(), descriptor_pools_.back(), nullptr);
    descriptor_pools_.pop_back();
  }
  if (!descriptor_pools_.empty())
    VK_CHECK(vk.vkResetDescriptorPool(context_.device(), descriptor_pools_[0], 0));
  query_count_ = 0;
  query_results_.clear();
  written_.clear();
  read_.clear();
  dispatches_ = barriers_ = 0;
  begin();
}

double Recorder::milliseconds(uint32_t from, uint32_t to) const {
  if (from >= query_results_.size() || to >= query_results_.size())
    throw Error("Recorder::milliseconds: no such timestamp in the last submit");
  const uint32_t bits = context_.info().timestamp_valid_bits;
  const uint64_t mask = bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1;
  const uint64_t ticks = (query_results_[to] - query_results_[from]) & mask;
  return double(ticks) * context_.info().timestamp_period_ns * 1e-6;
}

}  // namespace vkgrad::vk
