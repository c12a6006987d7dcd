// Base fixture of every GPU test: one Context per test process, created on the
// default device (VKGRAD_DEVICE picks another) with the Khronos validation layer on.
// Any validation warning or error during a test fails it. No device fails the test,
// it never skips.
#pragma once

#include <gtest/gtest.h>

#include "vkgrad/vk/context.h"

namespace vkgrad::test {

vk::Context& sharedContext();

class VkTest : public ::testing::Test {
 protected:
  static vk::Context& ctx() { return sharedContext(); }
  void SetUp() override;
  void TearDown() override;

 private:
  size_t messages_before_ = 0;
};

}  // namespace vkgrad::test
