// Shared by the tests of the kernels' builds within four storage buffers (the .sb4 builds,
// docs/DESIGN.md "Four storage buffers"): a context that believes the device binds only 4,
// and a bit-for-bit comparison with what the usual builds compute.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "vkgrad/vk/context.h"

namespace vkgrad::test {

// A Context with validation on that binds at most 4 storage buffers per stage.
inline vk::Context fourBuffers() {
  vk::ContextOptions options;
  options.validation = true;
  options.limits.max_storage_buffers = 4;
  return vk::Context(options);
}

// got and want hold the same bits, element by element.
inline ::testing::AssertionResult sameBits(const std::vector<float>& got,
                                           const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], 4) != 0)
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

}  // namespace vkgrad::test
