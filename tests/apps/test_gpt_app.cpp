// vkgrad-gpt as a user runs it, with validation on: train writes the checkpoint, the plot
// and a JSON line whose losses fall; sample continues a prompt from the checkpoint; bad
// input (missing or empty file, a prompt outside the vocabulary or longer than the context,
// a checkpoint from another config) fails with a clear message; --profile prints a table.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/process.h"
#include "common/temp_dir.h"
#include "vkgrad/gpt/checkpoint.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class GptApp : public TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    std::ofstream text(dir_ / "text.txt");
    for (int i = 0; i < 40; ++i) text << "the cat sat on the mat. a dog ran in the fog.\n";
  }

  // Trains the test's model; extra options are appended (a "--batch" there replaces the 8).
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
    if (std::find(extra.begin(), extra.end(), "--batch") != extra.end()) {
      const auto batch = std::find(args.begin(), args.end(), "--batch");
      args.erase(batch, batch + 2);
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("gpt", args);
  }
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
  EXPECT_TRUE(contains(run.out, "step 20/60  loss ")) << run.out;
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
  EXPECT_TRUE(contains(s.err, "ms per token, cached decoding")) << s.err;
  // Greedy text with the key/value cache and without it is the same within the context (16:
  // a 4-byte prompt and 12 more); past it the window slides and the cache restarts.
  auto greedy = [&](const char* kv_cache) {
    return runApp("gpt", {"sample", "--checkpoint", out.string(), "--prompt", "the ", "--tokens",
                          "12", "--top-k", "1", "--kv-cache", kv_cache});
  };
  const AppRun on = greedy("on"), off = greedy("off");
  ASSERT_EQ(on.exit_code, 0) << on.err;
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(on.out, off.out);
  EXPECT_TRUE(contains(off.err, "window decoding")) << off.err;
  const AppRun maybe = greedy("maybe");
  EXPECT_EQ(maybe.exit_code, 2);
  EXPECT_TRUE(contains(maybe.err, "--kv-cache must be on or off")) << maybe.err;

  // eval on the training text: every byte but the first predicted once.
  const AppRun eval = runApp("gpt", {"eval", "--checkpoint", out.string(), "--data",
                                     (dir_ / "text.txt").string(), "--json"});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const graph::Json e = lastJsonLine(eval.out);
  EXPECT_EQ(e.at("tokens").get<int64_t>(), int64_t(fs::file_size(dir_ / "text.txt")) - 1);
  EXPECT_GT(e.at("loss").get<double>(), 0.0);
  EXPECT_LT(e.at("loss").get<double>(), 2.83);  // the uniform loss over its 17 bytes

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
  // Files edited by hand from here: without its manifest a folder is read as it is.
  fs::remove(out / "manifest.json");
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
  EXPECT_TRUE(contains(shortText.err, "tokens is too short for context 4000")) << shortText.err;
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
  // A directory is a corpus of its text files (test_gpt_corpus.cpp); this one has none.
  fs::create_directories(dir_ / "no-text");
  const AppRun directory = runApp("gpt", {"train", "--data", (dir_ / "no-text").string()});
  EXPECT_EQ(directory.exit_code, 1);
  EXPECT_TRUE(contains(directory.err, "holds no text files")) << directory.err;

  // A diverging run (the weights multiplied by 1 - lr * decay = -99 every step) stops at the
  // first non-finite loss it reads and writes nothing.
  const AppRun diverged = train(dir_ / "diverged", {"--lr", "10", "--weight-decay", "10",
                                                    "--schedule", "constant", "--log-every", "1"});
  EXPECT_EQ(diverged.exit_code, 1);
  EXPECT_TRUE(contains(diverged.err, "training stopped and nothing more was saved"))
      << diverged.err;
  EXPECT_FALSE(fs::exists(dir_ / "diverged" / "model.safetensors"));

  const fs::path out = dir_ / "ckpt";
  ASSERT_EQ(train(out, {"--steps", "2"}).exit_code, 0);
  // Files edited by hand from here: without its manifest a folder is read as it is.
  fs::remove(out / "manifest.json");
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

// Out of device memory (a limit far below what batch 512 needs): the app predicts it before
// allocating, says what the run would hold, exits 1, and writes nothing: not even an empty
// --out folder.
TEST_F(GptApp, OutOfMemoryExitsCleanlyWritingNothing) {
  const fs::path out = dir_ / "oom";
  const AppRun run =
      runApp("gpt",
             {"train", "--data", (dir_ / "text.txt").string(), "--out", out.string(), "--layers",
              "1", "--width", "16", "--context", "16", "--batch", "512", "--validation"},
             {{"VKGRAD_MEMORY_LIMIT", "1M"}});
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_TRUE(contains(run.err, "more than the 1.0 MiB memory limit")) << run.err;
  EXPECT_TRUE(contains(run.err, "\n  parameters ")) << run.err;
  EXPECT_TRUE(contains(run.err, "\n  activation arena ")) << run.err;
  EXPECT_FALSE(fs::exists(out)) << "a run that failed made " << out;
}

// 60 steps in one go, and 25 + --resume 35 (with dropout, so the generator's state counts):
// the same bits. A resumed run keeps its options: another --lr is refused before any work.
TEST_F(GptApp, ResumeContinuesARunBitForBit) {
  const std::vector<std::string> opts{"--dropout", "0.1", "--save-every", "10"};
  const AppRun straight = train(dir_ / "straight", opts);
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  std::vector<std::string> paused = opts;
  paused.insert(paused.end(), {"--stop-at", "25"});
  const AppRun first = train(dir_ / "paused", paused);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_TRUE(contains(first.out, "stopped after step 25 of 60")) << first.out;

  const AppRun clash =
      runApp("gpt", {"train", "--resume", (dir_ / "paused").string(), "--lr", "0.5"});
  EXPECT_EQ(clash.exit_code, 2);
  EXPECT_TRUE(contains(clash.err, "--lr 0.5 differs from the resumed run's")) << clash.err;

  const AppRun rest = runApp("gpt", {"train", "--resume", (dir_ / "paused").string(), "--log-every",
                                     "20", "--json", "--validation"});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_TRUE(contains(rest.out, "resumed after step 25 of 60")) << rest.out;
  EXPECT_EQ(lastJsonLine(rest.out)["steps"], 60);
  EXPECT_EQ(savedWeights((dir_ / "straight" / "model.safetensors").string()),
            savedWeights((dir_ / "paused" / "model.safetensors").string()))
      << "the weights differ after the resume";
  EXPECT_EQ(lastJsonLine(straight.out)["train_loss"], lastJsonLine(rest.out)["train_loss"]);

  const AppRun finished = runApp("gpt", {"train", "--resume", (dir_ / "paused").string()});
  EXPECT_EQ(finished.exit_code, 1);
  EXPECT_TRUE(contains(finished.err, "nothing to resume")) << finished.err;
}

// SIGKILL at random moments of a run that checkpoints every step: each time the directory
// holds a complete checkpoint (every file parses, the state loads), and the next round
// resumes from it. The delays are printed, so a failure can be replayed.
TEST_F(GptApp, AKillAtAnyMomentLeavesACompleteCheckpoint) {
  const fs::path out = dir_ / "killed";
  std::mt19937 pick(std::random_device{}());
  std::string delays;
  int64_t last_step = 0;
  for (int round = 0; round < 6; ++round) {
    std::vector<std::string> args;
    if (round == 0)
      args = {"train",       "--data",       (dir_ / "text.txt").string(),
              "--out",       out.string(),   "--layers",
              "1",           "--width",      "16",
              "--context",   "16",           "--batch",
              "4",           "--steps",      "100000",
              "--schedule",  "constant",     "--save-every",
              "1",           "--eval-every", "0",
              "--log-every", "1000"};
    else
      args = {"train", "--resume", out.string()};
    const int delay_ms = std::uniform_int_distribution<int>(0, 400)(pick);
    delays += " " + std::to_string(delay_ms);
    bool killed = false;
    const fs::path state_file = out / "train_state.safetensors";
    const auto saved_before =
        fs::exists(state_file) ? fs::last_write_time(state_file) : fs::file_time_type::min();
    const AppRun run = runApp("gpt", args, {}, [&](int pid) {
      // Wait until this run has written a checkpoint of its own, then a random moment.
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (std::chrono::steady_clock::now() < deadline &&
             !(fs::exists(state_file) && fs::last_write_time(state_file) > saved_before))
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      killed = killProcess(pid);
    });
    SCOPED_TRACE("round " + std::to_string(round) + ", delays (ms):" + delays);
    ASSERT_TRUE(killed);
    ASSERT_EQ(run.exit_code, kKilledExitCode) << run.out << run.err;
    // Every file is whole and of one save (reading the config settles what the kill left);
    // the training state is at or after the last round's.
    const int64_t steps_done = gpt::readConfig(out).training.at("steps_done").get<int64_t>();
    const graph::Checkpoint state = graph::loadSafetensors(out / "train_state.safetensors");
    EXPECT_EQ(std::stoll(state.metadata.at("vkgrad.step")), steps_done);
    EXPECT_EQ(
        std::stoll(graph::loadSafetensors(out / "model.safetensors").metadata.at("vkgrad.step")),
        steps_done);
    const int64_t step = std::stoll(state.metadata.at("vkgrad.step"));
    EXPECT_GE(step, last_step);
    std::printf("round %d: killed after %d ms at a checkpoint of step %lld\n", round, delay_ms,
                static_cast<long long>(step));
    last_step = step;
    EXPECT_NO_THROW(graph::loadSafetensors(out / "model.safetensors"));
    EXPECT_NO_THROW(graph::readJsonFile(out / "config.json"));
  }
  // The last kill's checkpoint continues to the end.
  const AppRun rest = runApp("gpt", {"train", "--resume", out.string(), "--steps",
                                     std::to_string(last_step + 3), "--validation"});
  EXPECT_EQ(rest.exit_code, 0) << rest.out << rest.err << "delays (ms):" << delays;
  EXPECT_TRUE(contains(rest.out, "resumed after step " + std::to_string(last_step))) << rest.out;
  for (const auto& entry : fs::directory_iterator(out))  // the killed runs' temporary files too
    EXPECT_FALSE(contains(entry.path().filename().string(), ".tmp.")) << entry.path();
}

// A save that dies half-way (here: the file-size limit kills the process while it writes the
// training state) leaves the folder with the last whole save: the state, the model and the
// config all of step 10, and --resume goes on from there.
// (Linux only: the file-size limit comes from prlimit, so Windows builds leave it out.)
#if !defined(_WIN32)
TEST_F(GptApp, ASaveThatDiesLeavesTheLastWholeCheckpoint) {
  const fs::path out = dir_ / "limited";
  const AppRun first = train(out, {"--stop-at", "10"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const uintmax_t state_bytes = fs::file_size(out / "train_state.safetensors");
  const AppRun killed =
      runProgram("/usr/bin/prlimit", {"--fsize=" + std::to_string(state_bytes / 2), appPath("gpt"),
                                      "train", "--resume", out.string(), "--stop-at", "20"});
  EXPECT_EQ(killed.exit_code, 128 + SIGXFSZ) << killed.out << killed.err;
  const auto stepOf = [&](const char* file) {
    return graph::loadSafetensors(out / file).metadata.at("vkgrad.step");
  };
  EXPECT_EQ(gpt::readConfig(out).training.at("steps_done"), 10);  // settles what the crash left
  EXPECT_FALSE(fs::exists(out / ".pending"));
  EXPECT_EQ(stepOf("model.safetensors"), "10");
  EXPECT_EQ(stepOf("train_state.safetensors"), "10");
  const AppRun rest = runApp("gpt", {"train", "--resume", out.string(), "--validation"});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_TRUE(contains(rest.out, "resumed after step 10 of 60")) << rest.out;
}
#endif

// Steps draw their windows with replacement: a batch larger than the windows a short text
// has trains (only an epoch needs a batch's rows).
TEST_F(GptApp, ABatchMayExceedTheWindows) {
  std::ofstream(dir_ / "tiny.txt")
      << "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz\n";
  const AppRun run =
      runApp("gpt", {"train", "--data", (dir_ / "tiny.txt").string(), "--context", "4", "--batch",
                     "64", "--steps", "3", "--layers", "1", "--width", "8", "--heads", "2", "--out",
                     (dir_ / "tiny").string(), "--validation"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

// --accumulate 4 micro-batches of 2 windows take the step of a batch of 8: the same losses
// (to rounding: the sums run in another order), with about a quarter of the activation arena.
// Not where the run trains on every row at once (the GNN) and not below 1.
TEST_F(GptApp, AccumulatedMicroBatchesTrainAsTheWholeBatch) {
  const AppRun whole = train(dir_ / "whole");
  const AppRun micro = train(dir_ / "micro", {"--batch", "2", "--accumulate", "4"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  ASSERT_EQ(micro.exit_code, 0) << micro.err;
  const auto json = [](const AppRun& run) {
    return graph::parseJson(run.out.substr(run.out.rfind("\n{") + 1), "vkgrad-gpt --json");
  };
  const graph::Json a = json(whole), b = json(micro);
  EXPECT_EQ(b.at("accumulate").get<int>(), 4);
  EXPECT_NEAR(b.at("val_loss").get<double>(), a.at("val_loss").get<double>(), 1e-4);
  EXPECT_NEAR(b.at("train_loss").get<double>(), a.at("train_loss").get<double>(), 1e-4);
  EXPECT_LT(b.at("arena_bytes").get<double>(), 0.35 * a.at("arena_bytes").get<double>());
  EXPECT_GT(b.at("tokens_per_s").get<double>(), 0.0);
  const AppRun zero = train(dir_ / "zero", {"--accumulate", "0"});
  EXPECT_EQ(zero.exit_code, 2);
  EXPECT_TRUE(contains(zero.err, "--accumulate")) << zero.err;
  const AppRun gnn = runApp("gnn", {"train", "--accumulate", "2"});
  EXPECT_EQ(gnn.exit_code, 2);
}

// --preset sets the options the command line does not give; the ones given win.
TEST_F(GptApp, PresetsSetWhatIsNotGiven) {
  const fs::path out = dir_ / "preset";
  const AppRun mid = train(out, {"--preset", "mid", "--steps", "2"});
  ASSERT_EQ(mid.exit_code, 0) << mid.err;
  const graph::Json config = graph::readJsonFile(out / "config.json");
  EXPECT_EQ(config["model"]["width"], 16);                        // given: the test's model
  EXPECT_FLOAT_EQ(config["training"]["lr"].get<float>(), 1e-3f);  // not given: the preset's
  // gpt2-small's context of 1024 is more than the test's text holds: refused before a device.
  const AppRun small =
      runApp("gpt", {"train", "--preset", "gpt2-small", "--data", (dir_ / "text.txt").string(),
                     "--out", (dir_ / "s").string()});
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_TRUE(contains(small.err, "too short for context 1024")) << small.err;
  const AppRun unknown =
      runApp("gpt", {"train", "--preset", "huge", "--data", (dir_ / "text.txt").string()});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(contains(unknown.err, "--preset huge is not one of gpt2-small, mid")) << unknown.err;
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
