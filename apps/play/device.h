// vkgrad-play's own Vulkan stack: a GLFW window, the instance (optionally with validation
// and synchronisation validation), its surface, and one device with a queue that does
// graphics, compute and present, and optionally a second queue for the engine (async
// compute). vkgrad adopts this device (externalDevice()); the app loads Vulkan through its own
// volk, vkgrad through its private, renamed copy.
#pragma once

#include <volk.h>

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"  // VK_CHECK, for the app's calls too

namespace vkgrad::play {

// Where the engine computes (--compute-queue) and how frames reach its buffers (--sharing).
struct ComputeQueue {
  bool separate = false;    // a queue of its own, else the graphics queue
  bool concurrent = false;  // separate, of another family: buffers shared CONCURRENT
};

class Device {
 public:
  // Opens a width x height window titled `title` and creates the stack on a device with a
  // queue family that does graphics, compute and present (Vulkan 1.2, timeline semaphores):
  // the one `selector` names (an index or part of a name, as vk::selectDevice reads it), else
  // discrete > integrated > any. Throws Error saying what is missing: a display (run under
  // xvfb-run), the loader, the validation layer, such a device. With validation, every warning and
  // error of the layer is printed to stderr and counted in `messages`, which must outlive the
  // Device (its own destruction is validated too).
  // compute.separate: the engine gets a queue of its own: one of a compute-only family where
  // the device has one, else a second queue of the graphics family, else (one queue, as on
  // lavapipe) the graphics queue after all, which computeNote() says.
  Device(int width, int height, const std::string& title, bool validation,
         const vk::DeviceSelector& selector, ComputeQueue compute, std::atomic<size_t>& messages);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  GLFWwindow* window() const { return window_; }
  VkInstance instance() const { return instance_; }
  VkSurfaceKHR surface() const { return surface_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queueFamily() const { return family_; }
  // The engine's queue: its family and index (the graphics queue's unless separate).
  uint32_t computeFamily() const { return compute_family_; }
  uint32_t computeIndex() const { return compute_index_; }
  // What the separate queue turned out to be, for the run's first line.
  const std::string& computeNote() const { return compute_note_; }
  // Frames acquire the engine's results from its family (exclusive buffers, another family).
  bool transfersOwnership() const { return compute_family_ != family_ && !compute_.concurrent; }
  const VkPhysicalDeviceProperties& properties() const { return properties_; }
  // For vkgrad::vk::Context: the same device, queue and loader.
  vk::ExternalDevice externalDevice() const;

  // A memory type among `types` (a VkMemoryRequirements::memoryTypeBits) with `flags`;
  // throws Error when there is none.
  uint32_t memoryType(uint32_t types, VkMemoryPropertyFlags flags) const;

 private:
  static VkBool32 VKAPI_PTR onMessage(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                      VkDebugUtilsMessageTypeFlagsEXT types,
                                      const VkDebugUtilsMessengerCallbackDataEXT* data, void* self);
  void createInstance(bool validation);
  void pickPhysicalDevice(const vk::DeviceSelector& selector);
  void chooseComputeQueue();
  void createDevice();
  void release();  // what the constructor made so far, in reverse

  GLFWwindow* window_ = nullptr;
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkSurfaceKHR surface_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties properties_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t family_ = 0;
  ComputeQueue compute_;
  vk::EnabledFeatures enabled_;  // what the device was created with, for vkgrad
  uint32_t compute_family_ = 0, compute_index_ = 0;
  std::string compute_note_;
  std::atomic<size_t>& messages_;  // atomic: the layer may call back from driver threads
};

}  // namespace vkgrad::play
