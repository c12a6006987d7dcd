#include "vkgrad/vk/error.h"

#include <volk.h>

#include <string>

namespace vkgrad {
namespace {

std::string describe(const char* call, VkResult result, const std::string& detail) {
  std::string text = call;
  // VK_CHECK passes the whole expression; keep only the function name.
  if (auto paren = text.find('('); paren != std::string::npos) text.resize(paren);
  text += std::string(" failed: ") + vk::resultName(result);
  if (!detail.empty()) text += " (" + detail + ")";
  return text;
}

}  // namespace

VulkanError::VulkanError(const char* call, VkResult result, const std::string& detail)
    : Error(describe(call, result, detail)), result_(result) {}

namespace vk {

const char* resultName(VkResult result) {
  switch (result) {
#define VKGRAD_RESULT(name) \
  case name:                \
    return #name;
    VKGRAD_RESULT(VK_SUCCESS)
    VKGRAD_RESULT(VK_NOT_READY)
    VKGRAD_RESULT(VK_TIMEOUT)
    VKGRAD_RESULT(VK_EVENT_SET)
    VKGRAD_RESULT(VK_EVENT_RESET)
    VKGRAD_RESULT(VK_INCOMPLETE)
    VKGRAD_RESULT(VK_ERROR_OUT_OF_HOST_MEMORY)
    VKGRAD_RESULT(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VKGRAD_RESULT(VK_ERROR_INITIALIZATION_FAILED)
    VKGRAD_RESULT(VK_ERROR_DEVICE_LOST)
    VKGRAD_RESULT(VK_ERROR_MEMORY_MAP_FAILED)
    VKGRAD_RESULT(VK_ERROR_LAYER_NOT_PRESENT)
    VKGRAD_RESULT(VK_ERROR_EXTENSION_NOT_PRESENT)
    VKGRAD_RESULT(VK_ERROR_FEATURE_NOT_PRESENT)
    VKGRAD_RESULT(VK_ERROR_INCOMPATIBLE_DRIVER)
    VKGRAD_RESULT(VK_ERROR_TOO_MANY_OBJECTS)
    VKGRAD_RESULT(VK_ERROR_FORMAT_NOT_SUPPORTED)
    VKGRAD_RESULT(VK_ERROR_FRAGMENTED_POOL)
    VKGRAD_RESULT(VK_ERROR_UNKNOWN)
    VKGRAD_RESULT(VK_ERROR_OUT_OF_POOL_MEMORY)
    VKGRAD_RESULT(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    VKGRAD_RESULT(VK_ERROR_FRAGMENTATION)
    VKGRAD_RESULT(VK_ERROR_INVALID_OPAQUE_CAPTURE_ADDRESS)
    VKGRAD_RESULT(VK_PIPELINE_COMPILE_REQUIRED)
    VKGRAD_RESULT(VK_ERROR_VALIDATION_FAILED_EXT)
    VKGRAD_RESULT(VK_ERROR_INVALID_SHADER_NV)
#undef VKGRAD_RESULT
    default:
      return "VK_RESULT_UNKNOWN";
  }
}

void throwVulkanError(const char* call, VkResult result, const std::string& detail) {
  switch (result) {
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      throw OutOfMemoryError(call, result, detail);
    case VK_ERROR_DEVICE_LOST:
      throw DeviceLostError(call, result, detail);
    default:
      throw VulkanError(call, result, detail);
  }
}

}  // namespace vk
}  // namespace vkgrad
