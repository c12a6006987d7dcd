// The tests' own process helpers (common/process.h): a child's exit status and output, and
// environment changes seen by getenv.
#include "common/process.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "common/temp_dir.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class Process : public TempDirTest {};

TEST_F(Process, RunsAChildAndCapturesItsExitStatusAndOutput) {
  const fs::path out = dir_ / "out", err = dir_ / "err";
  int pid = 0;
  // vkgrad-sample-only without arguments prints its usage to stderr and exits 2.
  EXPECT_EQ(runChild(VKGRAD_SAMPLE_ONLY, {}, {{"VKGRAD_TEST_UNUSED", "1"}}, out.string(),
                     err.string(), [&](int child) { pid = child; }),
            2);
  EXPECT_GT(pid, 0);
  EXPECT_NE(pid, processId());
  std::ifstream in(err);
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  EXPECT_NE(text.find("usage: vkgrad-sample-only"), std::string::npos) << text;
  EXPECT_TRUE(fs::exists(out));
  EXPECT_TRUE(isExecutable(VKGRAD_SAMPLE_ONLY));
  EXPECT_FALSE(isExecutable((dir_ / "nothing-here").string()));
}

TEST_F(Process, SetsAndRemovesEnvironmentVariables) {
  const std::string name = "VKGRAD_TEST_PROCESS_" + std::to_string(processId());
  setEnv(name.c_str(), "a value");
  ASSERT_NE(std::getenv(name.c_str()), nullptr);
  EXPECT_EQ(std::string(std::getenv(name.c_str())), "a value");
  setEnv(name.c_str(), nullptr);
  EXPECT_EQ(std::getenv(name.c_str()), nullptr);
}

}  // namespace
}  // namespace vkgrad::test
