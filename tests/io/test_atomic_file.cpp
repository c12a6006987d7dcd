// Atomic files (io/atomic_file.h) through the platform's own calls: a write replaces the
// old file whole, a failed one leaves the target and no temporary file, and the temporary
// files of ended writers are told from live ones by their pid.
#include "vkgrad/io/atomic_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "common/process.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class AtomicFile : public TempDirTest {};

std::string readAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Random bytes, nulls and line breaks among them (the file is binary: nothing translated).
std::string randomBytes(size_t n) {
  static Rng rng;
  std::string out(n, '\0');
  for (size_t i = 0; i < n; ++i) out[i] = char(rng.below(256));
  return out;
}

// The names in dir that hold ".tmp.": what a write left behind.
std::vector<std::string> temporaries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().find(".tmp.") != std::string::npos)
      out.push_back(entry.path().filename().string());
  return out;
}

TEST_F(AtomicFile, WritesThePiecesAndReplacesTheOldFile) {
  const fs::path path = dir_ / "state.bin";
  const std::string a = randomBytes(1001), b = randomBytes(77);
  const std::string_view pieces[] = {a, "", b};
  graph::writeFileAtomically(path, pieces);
  EXPECT_EQ(readAll(path), a + b);
  const std::string shorter = randomBytes(13);
  graph::writeFileAtomically(path, shorter);
  EXPECT_EQ(readAll(path), shorter);
  EXPECT_TRUE(temporaries(dir_).empty());
}

TEST_F(AtomicFile, AFailedWriteLeavesTheTargetAndNoTemporaryFile) {
  // A folder where the file should go: the temporary file is written, the rename refused.
  const fs::path blocked = dir_ / "blocked";
  fs::create_directory(blocked);
  std::ofstream(blocked / "inside") << "kept";
  try {
    graph::writeFileAtomically(blocked, randomBytes(100));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blocked: cannot replace the file"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(readAll(blocked / "inside"), "kept");
  EXPECT_TRUE(temporaries(dir_).empty());
  // A folder that does not exist: nothing can be created.
  EXPECT_THROW(graph::writeFileAtomically(dir_ / "missing" / "file.bin", "x"), Error);
  EXPECT_FALSE(fs::exists(dir_ / "missing"));
}

TEST_F(AtomicFile, TellsAbandonedTemporaryFilesByTheirWriter) {
  const std::string mine = "model.safetensors.tmp." + std::to_string(processId());
  EXPECT_FALSE(graph::isAbandonedTemporary(dir_ / mine));  // this process still runs
  // A child that has ended (it prints its usage and exits 2).
  int ended = 0;
  const fs::path out = dir_ / "child.out", err = dir_ / "child.err";
  EXPECT_EQ(runChild(VKGRAD_SAMPLE_ONLY, {}, {}, out.string(), err.string(),
                     [&](int pid) { ended = pid; }),
            2);
  ASSERT_GT(ended, 0);
  EXPECT_TRUE(graph::isAbandonedTemporary(dir_ / ("config.json.tmp." + std::to_string(ended))));
  for (const char* name : {"config.json", "config.json.tmp.", "config.json.tmp.12x",
                           "config.json.tmp.0", "config.json.tmp.123456789012345678901"})
    EXPECT_FALSE(graph::isAbandonedTemporary(dir_ / name)) << name;
}

}  // namespace
}  // namespace vkgrad::test
