// The errors every vkgrad layer throws, Vulkan-free so the graph and model layers (and apps
// that only build graphs) can catch them without Vulkan headers. Failures of Vulkan calls
// themselves (VulkanError and its out-of-memory and device-lost subclasses) are in vk/error.h.
#pragma once

#include <stdexcept>
#include <string>

namespace vkgrad {

// Base of every vkgrad exception.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input to an op: wrong ranks, mismatched dims, buffers too small. Thrown before
// any GPU work is recorded (or any graph node added).
class ShapeError : public Error {
 public:
  using Error::Error;
};

}  // namespace vkgrad
