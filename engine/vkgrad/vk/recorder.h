// Records dispatches into one command buffer, inserting a compute->compute barrier
// only before a dispatch that touches memory an earlier dispatch (since the last
// barrier) wrote, or writes memory one read. Ops never insert barriers themselves.
// A recording can be submitted once or replayed many times.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "vkgrad/vk/vulkan.h"

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::vk {

class Context;
class Kernel;

// One binding of a dispatch: bytes [offset, offset + bytes) of a buffer (bytes 0: to the
// end). A uniform texel buffer binding views that range as texel.
struct Arg {
  Arg(const Buffer& b) : buffer(&b) {}  // NOLINT: whole buffers convert implicitly
  Arg(const Buffer& b, VkDeviceSize offset_, VkDeviceSize bytes_, TexelFormat texel_ = TexelFormat::Rgba32f)
      : buffer(&b), offset(offset_), bytes(bytes_), texel(texel_) {}
  Arg(const Buffer& b, TexelFormat texel_) : buffer(&b), texel(texel_) {}
  const Buffer* buffer;
  VkDeviceSize offset = 0;
  VkDeviceSize bytes = 0;
  TexelFormat texel = TexelFormat::Rgba32f;
};

inline uint32_t divUp(uint64_t n, uint32_t d) { return static_cast<uint32_t>((n + d - 1) / d); }

class Recorder {
 public:
  explicit Recorder(Context& context);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Dispatches enough workgroups to cover threads_x * threads_y * threads_z invocations.
  // args bind in order to the kernel's bindings 0..n-1; push is copied as push constants.
  void dispatch(const Kernel& kernel, std::span<const Arg> args, const void* push,
                uint32_t push_bytes, uint64_t threads_x, uint64_t threads_y = 1,
                uint64_t threads_z = 1);
  template <class Push>
  void dispatch(const Kernel& kernel, std::initializer_list<Arg> args, const Push& push,
                uint64_t threads_x, uint64_t threads_y = 1, uint64_t threads_z = 1) {
    static_assert(sizeof(Push) <= 128, "push constants are limited to 128 bytes");
    dispatch(kernel, std::span<const Arg>(args.begin(), args.size()), &push, sizeof(Push),
             threads_x, threads_y, threads_z);
  }
  // Same, with an explicit workgroup count (for kernels that loop over their input).
  void dispatchGroups(const Kernel& kernel, std::span<const Arg> args, const void* push,
                      uint32_t push_bytes, uint32_t groups_x, uint32_t groups_y = 1,
                      uint32_t groups_z = 1);

  // Sets every 32-bit word of [offset, offset + bytes) of buffer (bytes 0: to the end).
  void fill(const Buffer& buffer, uint32_t word, VkDeviceSize offset = 0, VkDeviceSize bytes = 0);
  void copy(const Buffer& src, VkDeviceSize src_offset, const Buffer& dst, VkDeviceSize dst_offset,
            VkDeviceSize bytes);
  // Writes `bytes` (a multiple of 4) of data into buffer at offset (a multiple of 4) when the
  // recording runs, every replay: small tables a kernel reads (vkCmdUpdateBuffer, in pieces
  // of at most 64 KiB). The data is copied into the command buffer now.
  void update(const Buffer& buffer, VkDeviceSize offset, const void* data, VkDeviceSize bytes);

  // Releases bytes [offset, offset + bytes) of buffer from the Context's queue family to
  // `family` after every earlier write (a queue-family ownership transfer's first half; the
  // other family's acquire completes it). Nothing is recorded where `family` is the Context's
  // own or its buffers are concurrent. Nothing later in the recording may touch the range.
  void release(const Buffer& buffer, VkDeviceSize offset, VkDeviceSize bytes, uint32_t family);
  // Records a timestamp after all earlier work; returns its index for milliseconds().
  uint32_t timestamp();

  // Ends recording (first time), submits, and waits. Call again to replay the recording.
  void submit();
  // The same without waiting: returns the submission's value on the Context's timeline.
  // `waits` and `signals` are the app's semaphores (Context::submit). A replay while the last
  // submission still runs first waits for it (a command buffer runs once at a time), as do
  // reset() and the destructor. Timestamps are read only by submit().
  uint64_t submitAsync(std::span<const SemaphoreWait> waits = {},
                       std::span<const SemaphoreSignal> signals = {});
  bool busy() const;  // the last submission has not finished
  void wait();        // until it has
  // Waits for the last submission and reads its timestamps (what submit() does after
  // submitting), for milliseconds() after a submitAsync().
  void readTimestamps();
  bool hasTimestamps() const { return !query_results_.empty(); }
  // Discards the recording; recording starts again.
  void reset();

  Context& context() const { return context_; }
  // Time between two timestamps of the last submit.
  double milliseconds(uint32_t from, uint32_t to) const;
  uint32_t dispatchCount() const { return dispatches_; }
  uint32_t barrierCount() const { return barriers_; }

 private:
  struct Range {
    VkBuffer buffer;
    VkDeviceSize begin, end;
  };
  void begin();
  void requireRecording(const char* what) const;
  void track(std::span<const Range> reads, std::span<const Range> writes);
  VkDescriptorSet allocateSet(const Kernel& kernel);

  Context& context_;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  uint64_t in_flight_ = 0;  // the last submission's timeline value
  std::vector<VkDescriptorPool> descriptor_pools_;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  uint32_t query_count_ = 0;
  std::vector<uint64_t> query_results_;
  bool recording_ = false;
  std::vector<Range> written_, read_;  // since the last barrier
  uint32_t dispatches_ = 0, barriers_ = 0;
};

}  // namespace vkgrad::vk
