// graph/bundle: a checkpoint folder holds all of one save or all of the one before. Each
// state a crash can leave (a staging folder before or after its commit, some files already
// moved) is built by hand and must settle to one whole save; a file from another save is
// refused by name; a save that fails cleans up after itself.
#include "vkgrad/io/bundle.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "common/temp_dir.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class BundleTest : public TempDirTest {
 protected:
  static void write(const fs::path& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ / name, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  // A save of two files whose contents name the save.
  void save(const std::string& tag) {
    graph::BundleWriter bundle(dir_);
    write(bundle.add("model.bin"), "model of " + tag);
    write(bundle.add("config.json"), "config of " + tag);
    bundle.commit();
  }
  std::string checkError() const {
    try {
      graph::checkBundle(dir_);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(BundleTest, ACommittedSaveIsWholeAndChecked) {
  save("one");
  save("two");
  EXPECT_EQ(checkError(), "");
  EXPECT_EQ(read("model.bin"), "model of two");
  EXPECT_EQ(read("config.json"), "config of two");
  EXPECT_FALSE(fs::exists(dir_ / graph::kPendingFolder));
  // A file of another save (same size, other bytes) is refused, naming it.
  write(dir_ / "model.bin", "model of one");
  const std::string error = checkError();
  EXPECT_NE(error.find("model.bin: differs from the checkpoint's manifest"), std::string::npos)
      << error;
  write(dir_ / "model.bin", "model of two");
  fs::remove(dir_ / "config.json");
  EXPECT_NE(checkError().find("config.json: missing"), std::string::npos) << checkError();
}

TEST_F(BundleTest, ACrashBeforeTheCommitLeavesTheLastSave) {
  save("one");
  // What the next save leaves if it dies uncommitted (a failing one cleans up: below).
  fs::create_directories(dir_ / graph::kPendingFolder);
  write(dir_ / graph::kPendingFolder / "model.bin", "model of two");
  EXPECT_EQ(checkError(), "");
  EXPECT_FALSE(fs::exists(dir_ / graph::kPendingFolder));
  EXPECT_EQ(read("model.bin"), "model of one");
  EXPECT_EQ(read("config.json"), "config of one");
}

// A save that fails before its commit (here a file it never wrote; on a full disk, a write)
// removes its staging folder on the way out, and the folder too where the save made it.
TEST_F(BundleTest, AFailedSaveRemovesItsStagingFolder) {
  save("one");
  {
    graph::BundleWriter bundle(dir_);
    write(bundle.add("model.bin"), "model of two");
    bundle.add("config.json");
    EXPECT_THROW(bundle.commit(), Error);
  }
  EXPECT_FALSE(fs::exists(dir_ / graph::kPendingFolder));
  EXPECT_EQ(checkError(), "");
  EXPECT_EQ(read("model.bin"), "model of one");
  EXPECT_EQ(read("config.json"), "config of one");
  const fs::path fresh = dir_ / "fresh" / "run";
  {
    graph::BundleWriter bundle(fresh);
    bundle.add("model.bin");
    EXPECT_THROW(bundle.commit(), Error);
  }
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_TRUE(fs::is_directory(dir_ / "fresh"));  // DIR only, not the folders above it
}

TEST_F(BundleTest, ACrashAfterTheCommitIsFinishedByTheReader) {
  save("one");
  save("two");
  // Rebuild what a crash in the middle of installing "three" leaves: the staging folder with
  // its manifest, the model already moved into the folder, the config not yet.
  const fs::path staging = dir_ / graph::kPendingFolder;
  fs::create_directories(staging);
  {
    graph::BundleWriter bundle(dir_);
    write(bundle.add("model.bin"), "model of three");
    write(bundle.add("config.json"), "config of three");
    bundle.commit();
  }
  const std::string manifest = read(graph::kManifestFile);
  save("two");  // back to two, then replay the crash on top of it by hand
  fs::create_directories(staging);
  write(staging / graph::kManifestFile, manifest);
  write(staging / "config.json", "config of three");
  write(dir_ / "model.bin", "model of three");
  EXPECT_EQ(checkError(), "");
  EXPECT_EQ(read("model.bin"), "model of three");
  EXPECT_EQ(read("config.json"), "config of three");
  EXPECT_FALSE(fs::exists(staging));
}

TEST_F(BundleTest, AFolderWithoutAManifestPasses) {
  write(dir_ / "model.bin", "written before bundles");
  EXPECT_EQ(checkError(), "");
}

}  // namespace
}  // namespace vkgrad::test
