// A Context is one logical device and compute queue, plus what the engine builds on
// it: the allocator, the staging buffer and the kernel cache. It either owns the
// whole Vulkan stack or adopts a host app's instance and device (and destroys neither).
// A Context is used from one thread at a time and outlives everything made from it.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/vk/vulkan.h"

#include "vkgrad/vk/device_info.h"
#include "vkgrad/vk/device_limits.h"
#include "vkgrad/vk/engine_features.h"

namespace vkgrad::vk {

class Instance;
class Allocator;
class Staging;
class KernelCache;

struct ContextOptions {
  bool validation = false;  // Khronos validation layer + debug messenger
  // Device index or case-insensitive name substring. Empty: the VKGRAD_DEVICE environment
  // variable if set, else the first discrete GPU, else integrated, else any (lavapipe).
  std::string device;
  // What errors call `device`: "<device_source>='x' matches no Vulkan device". The programs
  // say "--device".
  std::string device_source = "device option";
  // Device memory the engine may take, in bytes (its allocator's blocks): asking for more
  // throws OutOfMemoryError as a full device would, so that path can be tested anywhere.
  // 0: the VKGRAD_MEMORY_LIMIT environment variable ("512M", "2G", bytes) if set, else none.
  uint64_t memory_limit = 0;
  // Let fp32 products round their inputs to fp16 and run on tensor cores with fp32 sums
  // (the Coopmat matmul), where the device has cooperative matrices. fp16's range is narrow:
  // inputs above 65504 become inf, below 2^-14 lose precision and below 2^-25 become 0, and
  // the backward's products (tiny gradients) are the most exposed; no loss scaling is applied
  // (like autocast fp16 without a GradScaler, unlike bf16). Off: fp32 products keep fp32
  // inputs. Also on where the VKGRAD_MATMUL environment variable is "fp16".
  bool fp16_matmul = false;
  // Limits below the device's, so that the paths past them (an activation arena over several
  // allocations, a tensor too large for one binding, no 16-bit storage) run and are tested on
  // any device: the Context's DeviceInfo reports the lower value and everything in the engine
  // obeys it. 0: the device's own. VKGRAD_LIMITS (parseDeviceLimits) applies too: the lower wins.
  DeviceLimits limits;
  // A named device profile imposed under `limits` (deviceProfile: "vulkan12-minimum",
  // "mobile"). Empty: the VKGRAD_DEVICE_PROFILE environment variable if set, else none.
  std::string profile;
};

// "512M" / "2G" / "1048576" (K, M, G, T: powers of 1024) in bytes; throws Error naming
// `source` for anything else, or 0.
uint64_t parseMemorySize(const std::string& text, const std::string& source);

// The selector these options give selectDevice, as Context applies it: options.device, else
// VKGRAD_DEVICE, else none. For showing the choice without creating a device (vkgrad-info).
DeviceSelector deviceSelector(const ContextOptions& options);

// A host app's Vulkan objects. The engine uses them and never destroys them. The device must
// have been created with Vulkan 1.2, the timelineSemaphore feature enabled, and a queue of
// queue_family that supports compute; the optional features the kernels use are listed by
// vk::EngineFeatures (vk/engine_features.h). The engine submits to that queue from the thread
// that uses the Context; the app must not submit to the same VkQueue from another thread at
// the same time (Vulkan's external synchronisation rule for queues).
//
// The engine's queue may be of another family than the app's (a compute-only family beside
// the graphics one: async compute). Its buffers are then the engine family's alone
// (VK_SHARING_MODE_EXCLUSIVE) and a result the app reads on its family moves over with a
// release and an acquire (Executor::releaseAfterStep, acquireBarrier below); or, with
// concurrent_families, every buffer is shared with those families (VK_SHARING_MODE_CONCURRENT)
// and needs no transfer, only the semaphores that order the work. README, "Queues".
struct ExternalDevice {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  uint32_t queue_family = 0;
  uint32_t queue_index = 0;
  PFN_vkGetInstanceProcAddr get_instance_proc_addr = nullptr;
  // Other queue families whose queues use the engine's buffers (the app's graphics family);
  // empty: exclusive buffers. queue_family itself may be listed; one family in all is exclusive.
  std::vector<uint32_t> concurrent_families;
  // What the device was created with (vk::enabledFeatures(device_info), or
  // EngineFeatures::enabled()): the engine then uses only the optional features enabled, and
  // refuses a device created without timelineSemaphore. Unset: it assumes every optional
  // feature the device offers was enabled (what EngineFeatures enables).
  std::optional<EnabledFeatures> enabled_features;
};

// A semaphore the engine's next submission waits for before `stages` run: the app's timeline
// semaphore at `value`, or a binary semaphore (value ignored).
struct SemaphoreWait {
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
};
// A semaphore the engine's submission signals when it finishes (timeline: to `value`).
struct SemaphoreSignal {
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;
};

// Where an engine tensor lives, for an app's own shaders and copies: `bytes` from `offset` of
// `buffer` (a storage buffer, exclusive to the Context's queue family unless it was created
// with ExternalDevice::concurrent_families). Valid as long as the object that handed it out
// (Executor, ParameterStore) lives.
struct BufferRange {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceSize offset = 0;
  VkDeviceSize bytes = 0;
};

// The app's half of a queue-family ownership transfer the engine released
// (Executor::releaseAfterStep): record it with vkCmdPipelineBarrier in a command buffer of
// family `to`, submitted after waiting for the engine's timeline value, before the commands
// that read the range with `dst_access` at dstStageMask (srcStageMask: the stages the
// semaphore wait names, or TOP_OF_PIPE). `from` is the engine's family
// (Context::queueFamily()).
inline VkBufferMemoryBarrier acquireBarrier(const BufferRange& range, uint32_t from, uint32_t to,
                                            VkAccessFlags dst_access) {
  VkBufferMemoryBarrier barrier{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
  barrier.srcAccessMask = 0;  // ignored by an acquire
  barrier.dstAccessMask = dst_access;
  barrier.srcQueueFamilyIndex = from;
  barrier.dstQueueFamilyIndex = to;
  barrier.buffer = range.buffer;
  barrier.offset = range.offset;
  barrier.size = range.bytes;
  return barrier;
}

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  explicit Context(const ExternalDevice& external);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Device-level entry points of this device (a per-Context volk table; usable where volk.h
  // is included, i.e. inside vkgrad).
  const vkgrad_VolkDeviceTable& vk() const { return *table_; }
  VkDevice device() const { return device_; }
  VkPhysicalDevice physicalDevice() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queueFamily() const { return queue_family_; }
  // The families every engine buffer is shared with (VK_SHARING_MODE_CONCURRENT, this one's
  // included): ExternalDevice::concurrent_families; empty: exclusive buffers.
  const std::vector<uint32_t>& concurrentFamilies() const { return concurrent_families_; }
  const DeviceInfo& info() const { return info_; }
  const Instance& instance() const { return *instance_; }
  bool ownsDevice() const { return owns_device_; }
  // ContextOptions::fp16_matmul (or VKGRAD_MATMUL=fp16), whether or not the device can.
  bool fp16Matmul() const { return fp16_matmul_; }

  Allocator& allocator() { return *allocator_; }
  Staging& staging() { return *staging_; }
  KernelCache& kernels() { return *kernels_; }

  // Validation warnings and errors seen so far (empty when validation is off).
  std::vector<std::string> validationMessages() const;

  // The engine's submissions, counted on one timeline semaphore: submission n signals value
  // n when it has finished on the device. An app makes its own GPU work wait for the engine
  // by waiting on timeline() at a value from submit() (or submitted()); the engine never
  // waits on the app's queue or device, only on its own values.
  VkSemaphore timeline() const { return timeline_; }
  uint64_t submitted() const { return submitted_; }  // the last submission's value (0: none)
  bool finished(uint64_t value) const;                // polls; never blocks
  void wait(uint64_t value);                          // blocks until finished(value)
  // Waits for all the engine's submissions; turns a lost device into DeviceLostError.
  void waitIdle() { wait(submitted_); }
  // True once any submission or wait reported VK_ERROR_DEVICE_LOST. From then on every
  // submission and allocation throws DeviceLostError (naming the first loss) instead of
  // touching the device; only destroying the Context (and making a new one) goes on.
  bool lost() const { return lost_; }
  // Marks the device lost as if the queue had just reported VK_ERROR_DEVICE_LOST, for fault
  // drills and tests of what an application does then. `why` goes into later errors.
  void markLost(const std::string& why);
  // Throws DeviceLostError when lost(); `what` names the refused work.
  void checkNotLost(const char* what) const;
  // The one way work reaches the queue: submits cmd (ended) after `waits`, signalling the
  // timeline's next value and `signals`; returns that value without waiting. The caller keeps
  // cmd unchanged until finished(value). A failed call throws VulkanError (DeviceLostError...).
  uint64_t submit(VkCommandBuffer cmd, std::span<const SemaphoreWait> waits = {},
                  std::span<const SemaphoreSignal> signals = {});
  void submitAndWait(VkCommandBuffer cmd) { wait(submit(cmd)); }

 private:
  void createEngineObjects(uint64_t memory_limit);

  std::unique_ptr<Instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  std::vector<uint32_t> concurrent_families_;
  bool owns_device_ = false;
  bool fp16_matmul_ = false;
  bool lost_ = false;
  std::string lost_why_;  // the first loss's message
  DeviceInfo info_;
  std::unique_ptr<vkgrad_VolkDeviceTable> table_;
  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t submitted_ = 0;
  // Destroyed before the device (see ~Context).
  std::unique_ptr<Allocator> allocator_;
  std::unique_ptr<Staging> staging_;
  std::unique_ptr<KernelCache> kernels_;
};

}  // namespace vkgrad::vk
