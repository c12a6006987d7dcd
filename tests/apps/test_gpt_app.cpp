// vkgrad-gpt as a user runs it, with validation on: train writes the checkpoint, the plot
// and a JSON line whose losses fall; sample continues a prompt from the checkpoint; bad
// input (missing or empty file, a prompt outside the vocabulary or longer than the context,
// a checkpoint from another config) fails with a clear message; --profile prints a table.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "graph/json_io.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GptApp : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("vkgrad_gpt_app_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream text(dir_ / "text.txt");
    for (int i = 0; i < 40; ++i) text << "the cat sat on the mat. a dog ran in the fog.\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  AppRun train(const fs::path& out, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"train",
                                  "--data",
                                  (dir_ / "text.txt").string(),
                                  "--out",
                                  out.string(),
                                  "--layers",
                                  "1",
                                  "--heads",
                                  "2",
                                  "--width",
                                  "16",
                                  "--context",
                                  "16",
                                  "--batch",
                                  "8",
                                  "--steps",
                                  "60",
                                  "--log-every",
                                  "20",
                                  "--eval-every",
                                  "30",
                                  "--validation",
                                  "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gpt", args);
  }
  fs::path dir_;
};

TEST_F(GptApp, TrainsWritesCheckpointAndSamples) {
  const fs::path out = dir_ / "ckpt";
  const AppRun run = train(out);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const std::string last = run.out.substr(run.out.rfind("\n{") + 1);
  const graph::Json result = graph::parseJson(last, "vkgrad-gpt --json");
  for (const char* key : {"train_loss", "val_loss", "ms_per_step", "tokens_per_s"})
    EXPECT_GT(result.at(key).get<double>(), 0.0) << key << " in " << last;
  EXPECT_EQ(result.at("steps").get<double>(), 60.0);
  EXPECT_FALSE(result.at("device").get<std::string>().empty());
  // ln(vocab 19) = 2.9 at the start; 60 steps on this text get well below it.
  EXPECT_LT(result.at("val_loss").get<double>(), 2.6) << run.out;
  EXPECT_TRUE(contains(run.out, "step     20/60")) << run.out;
  for (const char* file : {"model.safetensors", "config.json", "loss.png"})
    EXPECT_TRUE(fs::is_regular_file(out / file)) << file;
  // config.json records the run beside the model.
  std::ifstream config_file(out / "config.json");
  const graph::Json config =
      graph::parseJson(std::string(std::istreambuf_iterator<char>(config_file), {}), "config.json");
  EXPECT_EQ(config.at("model").at("width"), 16);
  EXPECT_EQ(config.at("training").at("steps"), 60);
  EXPECT_EQ(config.at("training").at("val_loss"), result.at("val_loss"));
  std::ifstream png(out / "loss.png", std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");

  const AppRun s = runApp("gpt", {"sample", "--checkpoint", out.string(), "--prompt", "the ",
                                  "--tokens", "30", "--top-k", "5", "--validation"});
  ASSERT_EQ(s.exit_code, 0) << s.out << s.err;
  EXPECT_EQ(s.out.substr(0, 4), "the ");
  EXPECT_EQ(s.out.size(), 4u + 30u + 1u) << s.out;

  const AppRun outside = runApp("gpt", {"sample", "--checkpoint", out.string(), "--prompt", "XYZ"});
  EXPECT_EQ(outside.exit_code, 1);
  EXPECT_TRUE(contains(outside.err, "'X' at position 0 is not in the model's vocabulary"))
      << outside.err;
  const AppRun longer =
      runApp("gpt", {"sample", "--checkpoint", out.string(), "--prompt", std::string(17, 'a')});
  EXPECT_EQ(longer.exit_code, 1);
  EXPECT_TRUE(contains(longer.err, "longer than the model's context of 16")) << longer.err;

  // Another config's weights under this config.json.
  const fs::path other = dir_ / "other";
  ASSERT_EQ(train(other, {"--width", "32", "--steps", "2"}).exit_code, 0);
  fs::copy_file(other / "model.safetensors", out / "model.safetensors",
                fs::copy_options::overwrite_existing);
  const AppRun mismatch = runApp("gpt", {"sample", "--checkpoint", out.string(), "--prompt", "a"});
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_TRUE(contains(mismatch.err, "does not match")) << mismatch.err;
}

TEST_F(GptApp, BadInputFailsClearly) {
  const AppRun missing = runApp("gpt", {"train", "--data", (dir_ / "nope.txt").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "nope.txt: cannot open")) << missing.err;
  std::ofstream(dir_ / "empty.txt").close();
  const AppRun empty = runApp("gpt", {"train", "--data", (dir_ / "empty.txt").string()});
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_TRUE(contains(empty.err, "the file is empty")) << empty.err;
  const AppRun shortText = train(dir_ / "x", {"--context", "4000"});
  EXPECT_EQ(shortText.exit_code, 1);
  EXPECT_TRUE(contains(shortText.err, "too short for context 4000")) << shortText.err;
  // An output directory that cannot be made (under a regular file): before any training.
  const AppRun badOut = train(dir_ / "text.txt" / "ckpt");
  EXPECT_EQ(badOut.exit_code, 1);
  EXPECT_TRUE(contains(badOut.err, "cannot create the output directory")) << badOut.err;
  EXPECT_FALSE(contains(badOut.out, "step ")) << badOut.out;
  const AppRun badWidth = train(dir_ / "x", {"--width", "15"});
  EXPECT_EQ(badWidth.exit_code, 2);
  EXPECT_TRUE(contains(badWidth.err, "multiple of heads")) << badWidth.err;
  const AppRun noCheckpoint = runApp("gpt", {"sample", "--checkpoint", (dir_ / "none").string()});
  EXPECT_EQ(noCheckpoint.exit_code, 1);
  EXPECT_TRUE(contains(noCheckpoint.err, "no such checkpoint directory")) << noCheckpoint.err;
  const AppRun unknown = runApp("gpt", {"fly"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.err, "unknown command 'fly'")) << unknown.err;
  const AppRun help = runApp("gpt", {"train", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--context")) << help.out;
}

// Found trying the app as a new user would (issue 18): each fails at once with a clear message.
TEST_F(GptApp, AbsurdOrBrokenInputsFailFast) {
  const AppRun directory = runApp("gpt", {"train", "--data", dir_.string()});
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_TRUE(contains(directory.err, "is a directory, not a text file")) << directory.err;

  // A diverging run (the weights multiplied by 1 - lr * decay = -99 every step) stops at the
  // first non-finite loss it reads and writes nothing.
  const AppRun diverged = train(dir_ / "diverged", {"--lr", "10", "--weight-decay", "10",
                                                    "--schedule", "constant", "--log-every", "1"});
  EXPECT_EQ(diverged.exit_code, 1);
  EXPECT_TRUE(contains(diverged.err, "training stopped and nothing was saved")) << diverged.err;
  EXPECT_FALSE(fs::exists(dir_ / "diverged" / "model.safetensors"));

  const fs::path out = dir_ / "ckpt";
  ASSERT_EQ(train(out, {"--steps", "2"}).exit_code, 0);
  const auto rewrite = [&](const std::string& from, const std::string& to) {
    std::ifstream in(out / "config.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = text.find(from);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, from.size(), to);
    std::ofstream(out / "config.json") << text;
  };
  // 20000 layers used to declare parameters for minutes before the weights were compared.
  rewrite("\"layers\":1", "\"layers\":20000");
  const auto start = std::chrono::steady_clock::now();
  const AppRun huge = runApp("gpt", {"sample", "--checkpoint", out.string()});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(huge.exit_code, 1);
  EXPECT_TRUE(contains(huge.err, "layers 20000 must be in [1, 256]")) << huge.err;
  rewrite("\"layers\":20000", "\"layers\":1");

  // A NaN weight: the safetensors data is raw little-endian f32 after its header, so the
  // last four bytes are the last element of some tensor.
  {
    std::fstream f(out / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-4, std::ios::end);
    const unsigned char nan_bits[4] = {0x00, 0x00, 0xc0, 0x7f};
    f.write(reinterpret_cast<const char*>(nan_bits), 4);
  }
  const AppRun nan = runApp("gpt", {"sample", "--checkpoint", out.string()});
  EXPECT_EQ(nan.exit_code, 1);
  EXPECT_TRUE(contains(nan.err, "holds NaN at element")) << nan.err;
}

// --profile ends the run with the last step's GPU time by op kind.
TEST_F(GptApp, ProfilePrintsTheStepByOp) {
  const AppRun run = train(dir_ / "profiled", {"--profile"});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const size_t table = run.out.find("GPU time of the last training step by op");
  ASSERT_NE(table, std::string::npos) << run.out;
  const std::string rows = run.out.substr(table);
  for (const char* op :
       {"\nmatmul ", "\nmatmulBackward ", "\nattentionBackward ", "\nadamw ", "\ntotal "})
    EXPECT_TRUE(contains(rows, op)) << op << " missing in\n" << rows;
}

}  // namespace
}  // namespace vkgrad::test
