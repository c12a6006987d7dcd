// vkgrad-gpt train --init DIR --context N: windows shorter than the model's positions, the
// model kept whole (its config's n_positions and its whole learned position table saved), and
// a window longer than the model's refused naming both lengths.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "models/hf/gpt2_folder.h"
#include "models/tokenizers/small_bpe.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GptHfContext : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    c_.vocab = smallTokenizerSize() + 3;
    c_.layers = 1;
    c_.heads = 2;
    c_.width = 10;
    c_.context = 9;  // n_positions: the position table's rows
    Rng rng;
    writeGpt2Folder(dir_ / "gpt2", c_, randomGptParameters(c_, rng));
    std::ofstream(dir_ / "data.txt") << licenceText(1500);
  }
  AppRun train(const std::string& context) {
    return runApp("gpt", {"train", "--init", (dir_ / "gpt2").string(), "--data",
                          (dir_ / "data.txt").string(), "--out", (dir_ / "tuned").string(),
                          "--steps", "2", "--batch", "2", "--context", context, "--validation"});
  }
  gpt::GptConfig c_;
};

TEST_F(GptHfContext, TrainsShorterWindowsAndKeepsThePositions) {
  const AppRun run = train("4");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("width 10, context 4,"), std::string::npos) << run.err;
  const fs::path out = dir_ / "tuned";
  EXPECT_EQ(graph::readJsonFile(out / "config.json").at("n_positions").get<int64_t>(), 9);
  const std::map<std::string, std::vector<uint32_t>> weights =
      savedWeights((out / "model.safetensors").string());
  ASSERT_TRUE(weights.count("transformer.wpe.weight"));
  EXPECT_EQ(weights.at("transformer.wpe.weight").size(), 9u * 10u);  // f32: all 9 rows

  const AppRun longer = train("10");
  EXPECT_EQ(longer.exit_code, 2);
  EXPECT_NE(longer.err.find("--context 10 is longer than the model's 9 positions"),
            std::string::npos)
      << longer.err;
}

}  // namespace
}  // namespace vkgrad::test
