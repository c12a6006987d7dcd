// vkgrad-gpt train --init DIR --context N: windows shorter than the model's positions, the
// model kept whole (its config's n_positions and its whole learned position table saved), and
// a window longer than the model's refused naming both lengths; and a bf16 folder whose token
// table binds only in 16 bits sampled (ParameterStore's check at the stored size).
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

// A bf16 folder whose token table binds only in 16 bits (GPT-2 124M's on lavapipe's 128 MiB:
// 147 MiB in f32, 74 in bf16) samples: under a forced binding limit between the two sizes the
// bf16 folder runs, and the f32 one is refused naming the table.
TEST_F(GptHfContext, SamplesABf16FolderWhoseTableBindsOnlyIn16Bits) {
  gpt::GptConfig c = c_;
  c.width = 32;
  Rng rng;
  const NamedArrays params = randomGptParameters(c, rng);
  Gpt2FolderOptions bf16;
  bf16.dtype = ops::DType::BF16;
  writeGpt2Folder(dir_ / "bf16", c, params, bf16);
  writeGpt2Folder(dir_ / "f32", c, params);
  const int64_t table = c.vocab * c.width;      // elements
  const int64_t limit = table * 3 / 256 * 256;  // bytes: more than 2 per element, under 4
  ASSERT_GT(limit, table * 2);
  ASSERT_GE(limit, c.width * 4 * c.width * 4);  // the MLP's weights fit in f32
  const auto sample = [&](const fs::path& folder) {
    return runApp("gpt",
                  {"sample", "--checkpoint", folder.string(), "--prompt", "Per", "--tokens", "3",
                   "--top-k", "1", "--validation"},
                  {{"VKGRAD_LIMITS", "storage=" + std::to_string(limit)}});
  };
  const AppRun half = sample(dir_ / "bf16");
  EXPECT_EQ(half.exit_code, 0) << half.err;
  const AppRun full = sample(dir_ / "f32");
  EXPECT_EQ(full.exit_code, 1) << full.err;
  EXPECT_NE(full.err.find("parameter \"emb.tok\""), std::string::npos) << full.err;
}

}  // namespace
}  // namespace vkgrad::test
