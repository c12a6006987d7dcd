// vkgrad-gpt train's memory, known before it is spent: --dry-run prints the predicted table (and
// a JSON line) without allocating, and its numbers are what a real run of the same config
// reports; a model that cannot fit under the memory limit stops at once with the table, having
// written nothing; bad options fail clearly.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GptDryRun : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    // Random words over a few letters: a fresh text (and vocabulary) every run.
    std::ofstream text(dir_ / "text.txt");
    for (int w = 0; w < 600; ++w) {
      for (uint32_t n = 1 + rng_.below(7); n > 0; --n) text << char('a' + rng_.below(12));
      text << (rng_.below(9) == 0 ? ".\n" : " ");
    }
  }

  // A small model's run with a random batch size.
  std::vector<std::string> small(const std::string& out) {
    return {"train",   "--data",  (dir_ / "text.txt").string(),
            "--out",   out,       "--layers",
            "1",       "--heads", "2",
            "--width", "16",      "--context",
            "16",      "--batch", std::to_string(1 + rng_.below(12))};
  }

  Rng rng_;
};

// The table's rows, their exact bytes adding up to the peak; then a real run of the same config
// (two steps, with its evaluations) reports that peak and that training arena.
TEST_F(GptDryRun, PrintsWhatARealRunThenAllocates) {
  SCOPED_TRACE(rng_.describe());
  for (const char* precision : {"fp32", "bf16"}) {
    SCOPED_TRACE(precision);
    std::vector<std::string> args = small((dir_ / "out").string());
    args.insert(args.end(), {"--precision", precision, "--validation", "--json"});
    std::vector<std::string> dry_args = args;
    dry_args.push_back("--dry-run");
    const AppRun dry = runApp("gpt", dry_args);
    ASSERT_EQ(dry.exit_code, 0) << dry.out << dry.err;
    EXPECT_FALSE(fs::exists(dir_ / "out")) << "a dry run wrote its output folder";
    EXPECT_FALSE(contains(dry.out, "step ")) << dry.out;
    const graph::Json predicted = lastJsonLine(dry.out);
    EXPECT_EQ(predicted.at("dry_run"), true);
    EXPECT_EQ(predicted.at("precision"), precision);
    uint64_t sum = 0;
    for (const auto& [row, key] :
         std::vector<std::pair<const char*, const char*>>{{"parameters", "parameter_bytes"},
                                                          {"gradients", "gradient_bytes"},
                                                          {"optimizer state", "optimizer_bytes"},
                                                          {"activation arena", "activation_bytes"},
                                                          {"datasets", "dataset_bytes"},
                                                          {"other", "other_bytes"}}) {
      const uint64_t bytes = predicted.at(key).get<uint64_t>();
      sum += bytes;
      const size_t line = dry.out.find("\n  " + std::string(row) + " ");
      ASSERT_NE(line, std::string::npos) << row << " missing in\n" << dry.out;
      EXPECT_NE(dry.out.find(std::to_string(bytes) + " bytes", line), std::string::npos)
          << row << " " << bytes << " in\n"
          << dry.out;
    }
    EXPECT_EQ(sum, predicted.at("peak_device_bytes").get<uint64_t>());
    EXPECT_TRUE(contains(dry.out, "\n  peak ")) << dry.out;
    EXPECT_GT(predicted.at("gradient_bytes").get<uint64_t>(), 0u);

    args.insert(args.end(), {"--steps", "2", "--eval-every", "1"});
    const AppRun real = runApp("gpt", args);
    ASSERT_EQ(real.exit_code, 0) << real.out << real.err;
    const graph::Json measured = lastJsonLine(real.out);
    EXPECT_EQ(measured.at("peak_device_bytes"), predicted.at("peak_device_bytes"));
    EXPECT_EQ(measured.at("arena_bytes"), predicted.at("arena_bytes"));
    EXPECT_EQ(measured.at("parameters"), predicted.at("parameters"));
    fs::remove_all(dir_ / "out");
  }
}

// 200 layers of width 2048 (about 10 billion parameters) under a 1 GiB limit: refused with the
// table before the device memory is touched, in seconds, writing nothing. The same through
// --memory-limit, and a dry run of it still reports.
TEST_F(GptDryRun, AModelThatCannotFitStopsBeforeAllocating) {
  SCOPED_TRACE(rng_.describe());
  const fs::path out = dir_ / "huge";
  const std::vector<std::string> args{"train",   "--data",      (dir_ / "text.txt").string(),
                                      "--out",   out.string(),  "--layers",
                                      "200",     "--width",     "2048",
                                      "--heads", "16",          "--context",
                                      "32",      "--validation"};
  const auto start = std::chrono::steady_clock::now();
  const AppRun env = runApp("gpt", args, {{"VKGRAD_MEMORY_LIMIT", "1G"}});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("refused in %.2f s\n", seconds);
  EXPECT_EQ(env.exit_code, 1) << env.out << env.err;
  EXPECT_TRUE(contains(env.err, "more than the 1.00 GiB memory limit")) << env.err;
  EXPECT_TRUE(contains(env.err, "nothing was allocated")) << env.err;
  EXPECT_TRUE(contains(env.err, "\n  optimizer state ")) << env.err;
  EXPECT_TRUE(contains(env.err, "\n  peak ")) << env.err;
  EXPECT_FALSE(contains(env.out, "step ")) << env.out;
  EXPECT_FALSE(fs::exists(out));
  // Declaring 10 billion parameters for real took minutes; the refusal must not.
  EXPECT_LT(seconds, 60.0);

  std::vector<std::string> with_option = args;
  with_option.insert(with_option.end(), {"--memory-limit", "1G"});
  const AppRun option = runApp("gpt", with_option, {{"VKGRAD_MEMORY_LIMIT", ""}});
  EXPECT_EQ(option.exit_code, 1) << option.err;
  EXPECT_TRUE(contains(option.err, "more than the 1.00 GiB memory limit")) << option.err;

  with_option.push_back("--dry-run");
  const AppRun dry = runApp("gpt", with_option);
  EXPECT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_TRUE(contains(dry.out, "GiB")) << dry.out;
}

TEST_F(GptDryRun, BadInputFailsClearly) {
  const std::string text = (dir_ / "text.txt").string();
  const AppRun limit =
      runApp("gpt", {"train", "--data", text, "--dry-run", "--memory-limit", "lots"});
  EXPECT_EQ(limit.exit_code, 2);
  EXPECT_TRUE(contains(limit.err, "--memory-limit='lots' is not a memory size")) << limit.err;
  const AppRun no_data = runApp("gpt", {"train", "--dry-run"});
  EXPECT_EQ(no_data.exit_code, 1);
  EXPECT_TRUE(contains(no_data.err, "no --data")) << no_data.err;
  const AppRun precision =
      runApp("gpt", {"train", "--data", text, "--dry-run", "--precision", "fp8"});
  EXPECT_EQ(precision.exit_code, 2);
  const AppRun context =
      runApp("gpt", {"train", "--data", text, "--dry-run", "--context", "100000"});
  EXPECT_EQ(context.exit_code, 2);
  EXPECT_TRUE(contains(context.err, "--context must be an integer in [1, 65536]")) << context.err;
  const AppRun help = runApp("gpt", {"train", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "--dry-run")) << help.out;
  EXPECT_TRUE(contains(help.out, "--memory-limit")) << help.out;
}

}  // namespace
}  // namespace vkgrad::test
