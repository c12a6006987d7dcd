// A fixture whose tests each get a fresh, empty folder (dir_), removed with everything in it
// when the test ends; named by the suite and the process, so suites running side by side
// (two builds' ctest at once) never share one.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "common/process.h"

namespace vkgrad::test {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("vkgrad-" + std::string(info->test_suite_name()) + "-" + std::to_string(processId()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

}  // namespace vkgrad::test
