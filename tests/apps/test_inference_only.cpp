// vkgrad::inference: a program that links it alone (tests/inference/sample_only.cpp) loads a
// checkpoint vkgrad-gpt trained and writes the greedy text `vkgrad-gpt sample` writes, and
// holds none of the training code (its symbols, by nm).
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/temp_dir.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class InferenceOnly : public TempDirTest {};

TEST_F(InferenceOnly, ASamplerLinkedWithoutTrainingCodeWritesTheAppsText) {
  {
    std::ofstream text(dir_ / "text.txt");
    for (int i = 0; i < 20; ++i) text << "the cat sat on the mat. a dog ran in the fog.\n";
  }
  const fs::path out = dir_ / "ckpt";
  const AppRun train = runApp("gpt", {"train", "--data", (dir_ / "text.txt").string(), "--out",
                                      out.string(), "--layers", "2", "--heads", "2", "--width",
                                      "16", "--context", "16", "--batch", "4", "--steps", "40"});
  ASSERT_EQ(train.exit_code, 0) << train.out << train.err;
  const AppRun only = runProgram(VKGRAD_SAMPLE_ONLY, {out.string(), "the ", "40"});
  ASSERT_EQ(only.exit_code, 0) << only.out << only.err;
  const AppRun app = runApp("gpt", {"sample", "--checkpoint", out.string(), "--prompt", "the ",
                                    "--tokens", "40", "--top-k", "1"});
  ASSERT_EQ(app.exit_code, 0) << app.err;
  EXPECT_EQ(only.out, app.out);
  EXPECT_EQ(only.out.size(), 4u + 40u + 1u) << only.out;

  const AppRun nm = runProgram("/usr/bin/nm", {"-C", "--defined-only", VKGRAD_SAMPLE_ONLY});
  ASSERT_EQ(nm.exit_code, 0) << nm.err << " (nm is binutils', with the compiler)";
  EXPECT_TRUE(contains(nm.out, "vkgrad::gpt::Sampler::next")) << "nm saw the program's code";
  for (const char* training :
       {"vkgrad::graph::Trainer::", "vkgrad::graph::backward(", "vkgrad::graph::Autograd",
        "vkgrad::graph::addOptimizer(", "vkgrad::graph::Schedule::", "vkgrad::graph::estimate"})
    EXPECT_FALSE(contains(nm.out, training)) << training << " is linked into the sampler";
}

}  // namespace
}  // namespace vkgrad::test
