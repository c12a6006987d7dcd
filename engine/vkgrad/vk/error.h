// Failed Vulkan calls: the call and VkResult name in every message. The Vulkan-free base
// errors (Error, ShapeError) are in core/error.h.
#pragma once

#include <string>

#include "vkgrad/vk/vulkan.h"

#include "vkgrad/core/error.h"

namespace vkgrad {

// A Vulkan call failed. what(): "vkCreateDevice failed: VK_ERROR_INITIALIZATION_FAILED".
class VulkanError : public Error {
 public:
  // detail, if given, is appended in parentheses: what was being attempted.
  VulkanError(const char* call, VkResult result, const std::string& detail = {});
  VkResult result() const { return result_; }

 private:
  VkResult result_;
};

// The device (or host) ran out of memory; what() says how much was asked for.
class OutOfMemoryError : public VulkanError {
 public:
  using VulkanError::VulkanError;
};

// The device was lost (driver reset, hang, removal); the Context is unusable afterwards.
class DeviceLostError : public VulkanError {
 public:
  using VulkanError::VulkanError;
};

namespace vk {

const char* resultName(VkResult result);

// Throws the right subclass of VulkanError for a failed call.
[[noreturn]] void throwVulkanError(const char* call, VkResult result,
                                   const std::string& detail = {});

}  // namespace vk
}  // namespace vkgrad

// Checks a VkResult; stays on in release builds. Throws with the call's text.
#define VK_CHECK(call)                                                                 \
  do {                                                                                 \
    VkResult vk_check_result_ = (call);                                                \
    if (vk_check_result_ < 0) ::vkgrad::vk::throwVulkanError(#call, vk_check_result_); \
  } while (0)
