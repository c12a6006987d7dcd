// vkgrad-gnn as a user runs it, with validation on: karate training writes the checkpoint,
// curves.png, graph.png and a JSON line; the graph task and a user's edge list run; bad input
// (an unknown model, a bad edge-list line, a missing file) fails with a clear message and the
// documented exit code, writing nothing; a full disk tears no checkpoint and no picture.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <stb_image.h>

#include "apps/run_app.h"
#include "common/temp_dir.h"
#include "vkgrad/io/bundle.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GnnApp : public TempDirTest {
 protected:
};

bool isPng(const fs::path& path) {
  int w = 0, h = 0, n = 0;
  return stbi_info(path.string().c_str(), &w, &h, &n) && w > 0 && h > 0;
}

TEST_F(GnnApp, KarateTrainsAndDrawsTheGraph) {
  const fs::path out = dir_ / "karate";
  const AppRun run = runApp("gnn", {"train", "--data", "karate", "--model", "gat", "--epochs", "60",
                                    "--out", out.string(), "--validation", "--profile", "--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::is_regular_file(out / "model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(out / "config.json"));
  EXPECT_TRUE(isPng(out / "curves.png"));
  EXPECT_TRUE(isPng(out / "graph.png"));
  const graph::Json result = lastJsonLine(run.out);
  EXPECT_EQ(result["nodes"], 34);
  EXPECT_EQ(result["edges"], 156 + 34);               // both directions and a self-loop per node
  EXPECT_GT(result["accuracy"].get<double>(), 0.75);  // chance 0.5; seed 1: 93.8 %
  EXPECT_TRUE(contains(run.out, "epoch 60/60  loss ")) << run.out;
  EXPECT_TRUE(contains(run.out, "edgeSoftmax")) << run.out;  // --profile's table
}

TEST_F(GnnApp, GraphTaskAndEdgeListsRun) {
  const AppRun cycles = runApp("gnn", {"train", "--data", "cycles", "--graphs", "200", "--epochs",
                                       "20", "--out", (dir_ / "c").string(), "--json"});
  ASSERT_EQ(cycles.exit_code, 0) << cycles.err;
  EXPECT_FALSE(fs::exists(dir_ / "c" / "graph.png"));  // many small graphs: no drawing
  const fs::path edges = dir_ / "g.txt";
  std::ofstream(edges) << "0 1\n1 2\n2 0\n3 4\n4 5\n5 3\n2 3\nnode 0 label 0\nnode 1 label 0\n"
                          "node 2 label 0\nnode 3 label 1\nnode 4 label 1\nnode 5 label 1\n";
  const AppRun file = runApp("gnn", {"train", "--data", edges.string(), "--model", "conv",
                                     "--epochs", "20", "--out", (dir_ / "f").string()});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_TRUE(isPng(dir_ / "f" / "graph.png"));
}

// 40 epochs of GAT with dropout in one go, and 15 + --resume 25: the same weights, bit for
// bit (run_app.h's expectResumeIsBitForBit).
TEST_F(GnnApp, ResumeContinuesARunBitForBit) {
  const auto train = [&](const std::string& out, const std::vector<std::string>& extra) {
    std::vector<std::string> args{"train", "--out", out, "--validation"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gnn", args);
  };
  expectResumeIsBitForBit(
      "gnn", train, dir_.string(),
      {"--model", "gat", "--epochs", "40", "--dropout", "0.2", "--log-every", "10"}, "epoch", 15,
      40, {"--model", "gcn"}, "--model gcn differs from the resumed run's gat");
}

// A picture that cannot be written (curves.png is a folder here) is a warning and exit status
// 1 at the end; the checkpoint is saved whole all the same.
TEST_F(GnnApp, APictureThatCannotBeWrittenLosesNoCheckpoint) {
  const fs::path out = dir_ / "pictureless";
  fs::create_directories(out / "curves.png");
  const AppRun run = runApp("gnn", {"train", "--epochs", "20", "--out", out.string()});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "warning: ")) << run.err;
  EXPECT_TRUE(contains(run.err, "the checkpoint was saved")) << run.err;
  EXPECT_EQ(graph::readJsonFile(out / "config.json")["training"]["epochs_done"], 20);
  EXPECT_FALSE(savedWeights((out / "model.safetensors").string()).empty());
  EXPECT_TRUE(isPng(out / "graph.png"));  // the pictures after it are still drawn
}

#if !defined(_WIN32)
// The files of a folder as they are now, by name.
std::map<std::string, std::string> filesIn(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    files[entry.path().filename().string()] = fileBytes(entry.path().string());
  return files;
}

// A save on a full disk (runAppOnAFullDisk: no file may pass half the training state's size)
// fails naming the file and the reason, removes its staging folder and leaves the folder as
// the last save left it. (POSIX: the limit.)
TEST_F(GnnApp, ASaveOnAFullDiskLeavesTheLastSaveAndNoStaging) {
  const fs::path out = dir_ / "full";
  ASSERT_EQ(runApp("gnn", {"train", "--epochs", "20", "--stop-at", "10", "--out", out.string()})
                .exit_code,
            0);
  const auto before = filesIn(out);
  const uintmax_t limit = fs::file_size(out / "train_state.safetensors") / 2;
  const AppRun run = runAppOnAFullDisk("gnn", limit, {"train", "--resume", out.string()});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, "train_state.safetensors: write failed: File too large"))
      << run.err;
  EXPECT_TRUE(contains(run.err, "saving epoch 20 failed")) << run.err;
  EXPECT_FALSE(fs::exists(out / graph::kPendingFolder));
  EXPECT_TRUE(filesIn(out) == before);  // byte for byte, and no temporary file
  EXPECT_EQ(graph::readJsonFile(out / "config.json")["training"]["epochs_done"], 10);
}

// On a full disk that still holds the checkpoint (each of its files is under the limit) but
// not the pictures drawn after it (curves.png and graph.png are over it), the checkpoint is
// saved, each picture stays the last run's whole picture, no temporary file is left, and the
// run ends with status 1 naming the picture and the reason.
TEST_F(GnnApp, APictureOnAFullDiskStaysWhole) {
  const fs::path out = dir_ / "full";
  ASSERT_EQ(runApp("gnn", {"train", "--epochs", "20", "--out", out.string()}).exit_code, 0);
  const auto before = filesIn(out);
  uintmax_t limit = 0;
  for (const auto& [name, bytes] : before)
    if (!name.ends_with(".png")) limit = std::max<uintmax_t>(limit, bytes.size() + 256);
  ASSERT_LT(limit, before.at("curves.png").size());  // the longer run's curves are larger still
  const AppRun run =
      runAppOnAFullDisk("gnn", limit, {"train", "--resume", out.string(), "--epochs", "30"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, (out / "curves.png").string() + ": write failed: File too large"))
      << run.err;
  EXPECT_TRUE(contains(run.err, (out / "graph.png").string() + ": write failed: File too large"))
      << run.err;
  EXPECT_EQ(graph::readJsonFile(out / "config.json")["training"]["epochs_done"], 30);
  const auto after = filesIn(out);
  for (const char* picture : {"curves.png", "graph.png"}) {
    EXPECT_TRUE(after.at(picture) == before.at(picture)) << picture;
    EXPECT_TRUE(isPng(out / picture)) << picture;
  }
  for (const auto& [name, bytes] : after) EXPECT_FALSE(contains(name, ".tmp.")) << name;
  EXPECT_FALSE(fs::exists(out / graph::kPendingFolder));
}
#endif

// A training state carrying a NaN (one Adam moment) is refused by --resume before any step,
// naming the tensor; the folder keeps what it held.
TEST_F(GnnApp, ResumeRefusesANonFiniteTrainingState) {
  const fs::path out = dir_ / "poisoned";
  ASSERT_EQ(runApp("gnn", {"train", "--epochs", "20", "--stop-at", "10", "--out", out.string()})
                .exit_code,
            0);
  const fs::path state = out / "train_state.safetensors";
  graph::Checkpoint saved = graph::loadSafetensors(state);
  for (graph::SavedTensor& t : saved.tensors)
    if (t.name == "trainer/l0.w.m") t.data.at(0) = 0x7fc00000u;
  graph::saveSafetensors(state, saved);
  fs::remove(out / "manifest.json");  // edited by hand: read as it is
  const AppRun resumed = runApp("gnn", {"train", "--resume", out.string()});
  EXPECT_EQ(resumed.exit_code, 1);
  // A bad value among the saved options names the file it came from.
  for (graph::SavedTensor& t : saved.tensors)
    if (t.name == "trainer/l0.w.m") t.data.at(0) = 0;
  graph::Json options = graph::parseJson(saved.metadata.at("run.options"), "run.options");
  options["hidden"] = "0";
  saved.metadata["run.options"] = graph::dumpJson(options);
  graph::saveSafetensors(state, saved);
  const AppRun zero = runApp("gnn", {"train", "--resume", out.string()});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(contains(zero.err,
                       "--hidden must be an integer in [1, 4096], got '0' (the value "
                       "saved in " +
                           state.string() + ")"))
      << zero.err;
  EXPECT_TRUE(contains(resumed.err, "state \"l0.w.m\" holds NaN at element 0")) << resumed.err;
  EXPECT_FALSE(contains(resumed.out, "epoch 20/20")) << resumed.out;
}

TEST_F(GnnApp, BadInputIsAClearError) {
  const AppRun model = runApp("gnn", {"train", "--model", "gin", "--out", (dir_ / "m").string()});
  EXPECT_EQ(model.exit_code, 2);
  EXPECT_TRUE(contains(model.err, "unknown model 'gin'")) << model.err;
  const fs::path edges = dir_ / "bad.txt";
  std::ofstream(edges) << "0 1\n1 two\n";
  const AppRun bad =
      runApp("gnn", {"train", "--data", edges.string(), "--out", (dir_ / "b").string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "bad.txt:2:")) << bad.err;
  EXPECT_FALSE(fs::exists(dir_ / "b" / "model.safetensors"));
  const AppRun missing = runApp(
      "gnn", {"train", "--data", (dir_ / "none.txt").string(), "--out", (dir_ / "n").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "cannot open")) << missing.err;
  // Inputs that would exhaust the host, a folder, and a line that would clear the terminal.
  const AppRun zero =
      runApp("gnn", {"train", "--data", "/dev/zero", "--out", (dir_ / "z").string()});
  EXPECT_EQ(zero.exit_code, 1);
  EXPECT_TRUE(contains(zero.err, "/dev/zero: more than 268435456 bytes")) << zero.err;
  const AppRun huge = runApp(
      "gnn", {"train", "--data", "sbm", "--nodes", "1073741823", "--out", (dir_ / "h").string()});
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_TRUE(contains(huge.err, "GiB of host memory; this machine has")) << huge.err;
  const AppRun folder =
      runApp("gnn", {"train", "--data", dir_.string(), "--out", (dir_ / "d").string()});
  EXPECT_EQ(folder.exit_code, 1);
  EXPECT_TRUE(contains(folder.err, "is a directory, not an edge list")) << folder.err;
  std::ofstream(dir_ / "esc.txt") << "0 1\n1 \x1b[2Jx\n";
  const AppRun esc = runApp(
      "gnn", {"train", "--data", (dir_ / "esc.txt").string(), "--out", (dir_ / "e").string()});
  EXPECT_EQ(esc.exit_code, 1);
  EXPECT_TRUE(contains(esc.err, "'\\x1b[2Jx'")) << esc.err;
  EXPECT_FALSE(contains(esc.err, "\x1b")) << "a raw escape byte reached the terminal";
  for (const char* out : {"z", "h", "d", "e"}) EXPECT_FALSE(fs::exists(dir_ / out)) << out;
  EXPECT_EQ(runApp("gnn", {"fly"}).exit_code, 2);
  const AppRun help = runApp("gnn", {"train", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--model")) << help.out;
}

}  // namespace
}  // namespace vkgrad::test
