// vkgrad-onnx as a user runs it: info on a model, run on .npy inputs (the outputs as the
// library computes them), train with --json (every step's loss, a model.onnx that loads and
// runs), bad input refused with a clear message and nothing written, and a full disk that
// leaves the last outputs whole.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/compare.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "onnx/model_builder.h"
#include "vkgrad/io/npy.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class OnnxApp : public TempDirTest {
 protected:
  // y = relu(x W + b), x (batch, 3) with an open batch axis.
  void SetUp() override {
    TempDirTest::SetUp();
    ModelBuilder m;
    m.input("x", {-1, 3}).output("y");
    w_ = rng_.normal(12);
    b_ = rng_.normal(4);
    m.floats("w", {3, 4}, w_).floats("b", {4}, b_);
    m.node("MatMul", {"x", "w"}, {"xw"});
    m.node("Add", {"xw", "b"}, {"h"});
    m.node("Relu", {"h"}, {"y"});
    std::ofstream(dir_ / "model.onnx", std::ios::binary) << m.bytes();
    x_ = rng_.normal(5 * 3);
    graph::writeNpy(dir_ / "x.npy", {5, 3}, x_);
    graph::writeNpy(dir_ / "t.npy", {5, 4}, rng_.normal(20));
  }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  Rng rng_;
  std::vector<float> x_, w_, b_;
};

TEST_F(OnnxApp, InfoNamesInputsOutputsAndOps) {
  const AppRun r = runApp("onnx", {"info", path("model.onnx")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "input   x float (batch,3)")) << r.out;
  EXPECT_TRUE(contains(r.out, "MatMul 1")) << r.out;
  EXPECT_TRUE(contains(r.out, "every op imports")) << r.out;
  const AppRun j = runApp("onnx", {"info", path("model.onnx"), "--json"});
  ASSERT_EQ(j.exit_code, 0) << j.err;
  EXPECT_EQ(lastJsonLine(j.out).at("parameter_elements"), 16);
}

TEST_F(OnnxApp, RunWritesEveryOutputAsTheLibraryComputesIt) {
  SCOPED_TRACE(rng_.describe());
  const AppRun r = runApp("onnx", {"run", path("model.onnx"), "--input", "x=" + path("x.npy"),
                                   "--out", path("out"), "--validation"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const graph::NpyArray y = graph::readNpy(dir_ / "out" / "y.npy");
  EXPECT_EQ(y.shape, (std::vector<int64_t>{5, 4}));
  std::vector<float> want(20);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 4; ++j) {
      double h = b_[size_t(j)];
      for (int k = 0; k < 3; ++k) h += double(x_[size_t(i * 3 + k)]) * w_[size_t(k * 4 + j)];
      want[size_t(i * 4 + j)] = float(std::max(h, 0.0));
    }
  EXPECT_TRUE(allClose(y.floats, want, 1e-6));  // dot products of 3 f32 terms
}

TEST_F(OnnxApp, TrainReportsEveryLossAndWritesARunnableModel) {
  const AppRun r =
      runApp("onnx", {"train", path("model.onnx"), "--input", "x=" + path("x.npy"), "--target",
                      path("t.npy"), "--steps", "6", "--batch", "2", "--lr", "0.05", "--json",
                      "--validation", "--out", path("trained")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const graph::Json last = lastJsonLine(r.out);
  ASSERT_EQ(last.at("losses").size(), 6u);
  EXPECT_EQ(last.at("final_loss"), last.at("losses").back());
  const AppRun again = runApp("onnx", {"run", path("trained/model.onnx"), "--input",
                                       "x=" + path("x.npy"), "--out", path("out2")});
  EXPECT_EQ(again.exit_code, 0) << again.err;
}

#if !defined(_WIN32)
// On a full disk (runAppOnAFullDisk: no file may pass half the output's size) a run fails
// naming the output file and the reason, and the last run's y.npy stays, byte for byte, with
// no temporary file beside it. (POSIX: the limit.)
TEST_F(OnnxApp, AFullDiskLeavesTheLastOutputs) {
  graph::writeNpy(dir_ / "a.npy", {400, 3}, rng_.normal(400 * 3));
  graph::writeNpy(dir_ / "b.npy", {400, 3}, rng_.normal(400 * 3));
  const fs::path y = dir_ / "out" / "y.npy";
  ASSERT_EQ(runApp("onnx", {"run", path("model.onnx"), "--input", "x=" + path("a.npy"), "--out",
                            path("out")})
                .exit_code,
            0);
  const std::string before = fileBytes(y.string());
  const AppRun run = runAppOnAFullDisk(
      "onnx", before.size() / 2,
      {"run", path("model.onnx"), "--input", "x=" + path("b.npy"), "--out", path("out")});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_TRUE(contains(run.err, y.string() + ": write failed: File too large")) << run.err;
  EXPECT_TRUE(fileBytes(y.string()) == before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "out"), fs::directory_iterator()), 1);
}
#endif

TEST_F(OnnxApp, BadInputIsNamedAndWritesNothing) {
  std::ofstream(dir_ / "bad.npy", std::ios::binary) << "not an npy file";
  const AppRun bad = runApp(
      "onnx", {"run", path("model.onnx"), "--input", "x=" + path("bad.npy"), "--out", path("out")});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "bad.npy: not a readable .npy file")) << bad.err;
  const AppRun name = runApp(
      "onnx", {"run", path("model.onnx"), "--input", "z=" + path("x.npy"), "--out", path("out")});
  EXPECT_EQ(name.exit_code, 1);
  EXPECT_TRUE(contains(name.err, "no input \"z\"")) << name.err;
  std::ofstream(dir_ / "cut.onnx", std::ios::binary) << std::string("\x08\x08\x12\x05", 4);
  const AppRun cut = runApp("onnx", {"info", path("cut.onnx")});
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_TRUE(contains(cut.err, "not an ONNX model")) << cut.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out"));
  EXPECT_EQ(runApp("onnx", {"run", "--help"}).exit_code, 0);
  EXPECT_EQ(runApp("onnx", {"train", path("model.onnx")}).exit_code, 2);
}

}  // namespace
}  // namespace vkgrad::test
