// Host <-> device copies through one reusable host-visible buffer. Transfers larger
// than the buffer go through it in chunks. Each call waits for its copies to finish (but
// uploadAsync), so it is for datasets, parameters, step inputs and readbacks, not for
// per-dispatch traffic. Each copy sits between full barriers, so it is ordered after all
// earlier work on the queue and before all later work.
//
// Small asynchronous uploads (a step's indices, a learning rate) go through a ring of
// kRingSlots slots instead, each with its own command buffer: such an upload waits only for
// the copy that used its slot kRingSlots uploads ago, never for the one just before it, which
// may sit on the queue behind a long step or an app's semaphore.
// Every call is counted, so tests can check that a training step moves only what it should.
#pragma once

#include <cstddef>
#include <cstdint>

#include "vkgrad/vk/vulkan.h"

namespace vkgrad::vk {

class Context;
class Buffer;

// Calls since the last reset: one per call that moved bytes, however many chunks it took.
// Rejected and zero-byte calls are not counted.
struct TransferCounts {
  uint64_t uploads = 0, downloads = 0;
  uint64_t upload_bytes = 0, download_bytes = 0;
};

class Staging {
 public:
  static constexpr int kRingSlots = 8;
  static constexpr VkDeviceSize kSlotBytes = VkDeviceSize(64) << 10;

  explicit Staging(Context& context, VkDeviceSize bytes = VkDeviceSize(16) << 20);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Copies bytes from host src into dst at dst_offset. Throws if it does not fit in dst.
  void upload(const Buffer& dst, VkDeviceSize dst_offset, const void* src, VkDeviceSize bytes);
  // The same, returning once src has been copied to host-visible memory when bytes fit in it
  // (the device copy then runs ahead), so a step's small inputs do not block a render loop.
  // Up to kSlotBytes go through the ring (a wait only when the slot's copy of kRingSlots
  // uploads ago is still pending); up to the buffer's size through the buffer (the next use of
  // the buffer waits for it); larger uploads wait as upload() does.
  void uploadAsync(const Buffer& dst, VkDeviceSize dst_offset, const void* src, VkDeviceSize bytes);
  // Copies bytes of src at src_offset into host dst.
  void download(const Buffer& src, VkDeviceSize src_offset, void* dst, VkDeviceSize bytes);

  const TransferCounts& counts() const { return counts_; }
  void resetCounts() { counts_ = {}; }

 private:
  void upload(const Buffer& dst, VkDeviceSize dst_offset, const void* src, VkDeviceSize bytes,
              bool wait);
  // Records one copy between full barriers and submits it; waits for it when `wait`, else
  // leaves it in flight (in_flight_).
  void copy(VkBuffer src, VkDeviceSize src_offset, VkBuffer dst, VkDeviceSize dst_offset,
            VkDeviceSize bytes, bool wait);
  // Waits until the last copy left in flight has finished: the buffer and the command
  // buffer are free again.
  void settle();

  // Host-visible memory, mapped: the staging buffer, or the ring's.
  struct Mapped {
    VkBuffer buffer = VK_NULL_HANDLE;
    VkDeviceMemory memory = VK_NULL_HANDLE;
    void* data = nullptr;
    bool coherent = false;
  };
  Mapped createMapped(VkDeviceSize bytes);
  void flush(const Mapped& m);
  // Records copy between full barriers into cmd and submits it; returns its timeline value.
  uint64_t submitCopy(VkCommandBuffer cmd, VkBuffer src, VkDeviceSize src_offset, VkBuffer dst,
                      VkDeviceSize dst_offset, VkDeviceSize bytes);

  Context& context_;
  VkDeviceSize bytes_;
  Mapped staging_, ring_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkCommandBuffer ring_cmd_[kRingSlots] = {};
  uint64_t ring_in_flight_[kRingSlots] = {};  // each slot's last copy (0: none)
  int ring_next_ = 0;
  TransferCounts counts_;
  uint64_t in_flight_ = 0;  // the Context's timeline value of a copy not waited for
};

}  // namespace vkgrad::vk
