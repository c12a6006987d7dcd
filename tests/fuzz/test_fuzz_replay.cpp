// Every stored input of every fuzz target (tests/fuzz/corpus/<target>/) replayed through the
// entry the fuzzer drives: the seeds ("valid-*", which the reader must accept) and the inputs
// fuzzing found ("crash-*", "leak-*", "oom-*", "timeout-*", ...: fixed bugs, now answered with
// a vkgrad::Error or accepted). Any other exception or a crash fails the test; under
// VKGRAD_SANITIZE so does any sanitizer report.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "vkgrad/core/error.h"
#include "fuzz/targets.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

std::string readBytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class FuzzReplay : public ::testing::TestWithParam<fuzz::Target> {};

TEST_P(FuzzReplay, StoredInputsAreAnsweredWithoutACrash) {
  const fuzz::Target& target = GetParam();
  const fs::path dir = fs::path(VKGRAD_FUZZ_CORPUS_DIR) / target.name;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int valid = 0, files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const std::string bytes = readBytes(entry.path());
    ++files;
    const auto start = std::chrono::steady_clock::now();
    try {
      target.run(bytes);
    } catch (const Error& e) {
      EXPECT_NE(name.rfind("valid-", 0), 0u) << name << " was rejected: " << e.what();
    }
    // A hang the fuzzer found must stay fixed too (seconds, not the fuzzer's 25 s timeout).
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5)) << name;
    valid += name.rfind("valid-", 0) == 0;
  }
  EXPECT_GT(valid, 0) << "no valid-* seed in " << dir;
  std::printf("%s: %d stored inputs replayed (%d valid seeds)\n", target.name, files, valid);
}

INSTANTIATE_TEST_SUITE_P(Targets, FuzzReplay,
                         ::testing::ValuesIn(fuzz::targets().begin(), fuzz::targets().end()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace vkgrad::test
