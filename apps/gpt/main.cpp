// vkgrad-gpt: trains a character-level (byte-level) GPT on a text file and samples from it.
// All model logic lives in models/gpt; this program parses options, reports progress and
// writes DIR/{model.safetensors, config.json, loss.png}.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/output_dir.h"
#include "common/plot.h"
#include "common/resume.h"
#include "vkgrad/gpt/checkpoint.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/sampler.h"
#include "vkgrad/gpt/vocab.h"
#include "vkgrad/graph/json_io.h"
#include "vkgrad/graph/parameters.h"
#include "vkgrad/graph/profile.h"
#include "vkgrad/graph/safetensors.h"
#include "vkgrad/graph/trainer.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string readText(const std::string& path) {
  if (path.empty()) throw Error("no --data file given");
  if (fs::is_directory(path)) throw Error(path + ": is a directory, not a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::stringstream s;
  s << in.rdbuf();
  if (s.str().empty()) throw Error(path + ": the file is empty");
  return s.str();
}

// This process's resident set (Linux /proc/self/statm), 0 where unknown.
uint64_t hostResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0;
  return pages_resident * uint64_t(::sysconf(_SC_PAGESIZE));
}

std::vector<uint32_t> evenlySpaced(int64_t count, int64_t want) {
  std::vector<uint32_t> out;
  want = std::min(want, count);
  for (int64_t i = 0; i < want; ++i) out.push_back(uint32_t(i * count / want));
  return out;
}

// The options that define a run (--resume takes them and refuses others) and its rhythm
// (taken unless given again).
const RunOptions kRun{{"data", "layers", "heads", "width", "context", "batch", "lr", "schedule",
                       "warmup", "weight-decay", "dropout", "norm", "tie", "seed"},
                      {"steps", "eval-every", "log-every", "save-every"}};

int train(int argc, char** argv) {
  Cli cli("vkgrad-gpt train",
          "Trains a byte-level GPT on a text file (the first 90% trains, the rest validates)\n"
          "and writes DIR/model.safetensors, DIR/config.json, DIR/loss.png and\n"
          "DIR/train_state.safetensors (what --resume continues from).");
  cli.positional("train", "the command");
  cli.option("data", "the text file to train on (required)");
  cli.option("out", "checkpoint directory (created if missing; with --resume: its DIR)", "gpt-out");
  cli.option("layers", "transformer blocks", "2");
  cli.option("heads", "attention heads per block", "4");
  cli.option("width", "model width (a multiple of heads)", "64");
  cli.option("context", "tokens per window", "64");
  cli.option("batch", "windows per step", "16");
  cli.option("steps", "optimizer steps", "600");
  cli.option("lr", "peak learning rate (AdamW)", "3e-3");
  cli.option("schedule", "cosine (warm-up then decay to lr/10) or constant", "cosine");
  cli.option("warmup", "warm-up steps of the cosine schedule", "30");
  cli.option("weight-decay", "AdamW decoupled weight decay (matrices only)", "0.1");
  cli.option("dropout", "dropout probability", "0");
  cli.option("norm", "pre (GPT-2) or post (the original transformer)", "pre");
  cli.flag("tie", "tie the output head to the token embedding");
  cli.option("seed", "initialisation and batch seed", "1");
  cli.option("eval-every", "steps between validation losses (0: only at the end)", "100");
  cli.option("log-every", "steps between progress lines", "20");
  cli.option("save-every", "steps between checkpoints (0: only at the end)", "0");
  declareResumeOptions(cli, "step");
  declareDeviceOptions(cli);
  cli.flag("profile",
           "time every node of the training step and print the last step's GPU "
           "time by op (a timestamp per node)");
  cli.flag("log-memory", "add host RSS and device memory in use to every progress line");
  cli.flag("json", "end with one JSON line of results");
  cli.parse(argc, argv);

  // A resumed run: its options and its state, read and checked before anything else.
  std::optional<graph::Checkpoint> resumed = resumeRun(cli, kRun, "vkgrad-gpt");
  const std::string resumed_from = (fs::path(cli.get("resume")) / kTrainStateFile).string();

  const std::string text = readText(cli.get("data"));
  gpt::GptConfig config;
  const gpt::ByteVocab vocab = gpt::ByteVocab::fromText(text);
  config.vocab = vocab.size();
  config.layers = cli.getInt("layers", 1, gpt::kMaxLayers);
  config.heads = cli.getInt("heads", 1, gpt::kMaxHeads);
  config.width = cli.getInt("width", 1, gpt::kMaxWidth);
  config.context = cli.getInt("context", 1, gpt::kMaxContext);
  config.dropout = float(cli.getDouble("dropout", 0.0, 0.99));
  config.tie_weights = cli.has("tie");
  const std::string norm = cli.get("norm");
  if (norm != "pre" && norm != "post") cli.fail("--norm must be pre or post");
  config.norm = norm == "pre" ? nn::Norm::Pre : nn::Norm::Post;
  try {
    config.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  const int64_t batch = cli.getInt("batch", 1, 1 << 20);
  const int64_t steps = cli.getInt("steps", 1, int64_t(1) << 40);
  const float lr = float(cli.getDouble("lr", 1e-8, 10.0));
  const uint64_t seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));
  const int64_t eval_every = cli.getInt("eval-every", 0, int64_t(1) << 40);
  const int64_t log_every = cli.getInt("log-every", 1, int64_t(1) << 40);
  const int64_t save_every = cli.getInt("save-every", 0, int64_t(1) << 40);
  const bool json = cli.has("json");

  const std::vector<uint32_t> tokens = vocab.encode(text);
  const int64_t split = int64_t(tokens.size()) * 9 / 10;
  const int64_t ctx = config.context;
  if (split < ctx + 1 || int64_t(tokens.size()) - split < ctx + 1)
    throw Error(cli.get("data") + ": " + std::to_string(tokens.size()) +
                " bytes is too short for context " + std::to_string(ctx) +
                ": both the training part (90%) and the validation part (10%) need at least "
                "context + 1 bytes");
  const std::span<const uint32_t> all(tokens);

  // The output directory before any training: a run must not end unable to save.
  const fs::path out = cli.get("out");
  prepareOutput(out);

  vk::Context context(contextOptions(cli));
  const std::string device = context.info().name;
  // Every window of the text, stored once on the device as the token stream.
  const gpt::TokenWindows train_w = gpt::uploadTokenWindows(context, all.first(size_t(split)), ctx);
  const gpt::TokenWindows val_w = gpt::uploadTokenWindows(context, all.subspan(size_t(split)), ctx);
  const int64_t val_disjoint = val_w.count / ctx + (val_w.count % ctx ? 1 : 0);
  std::fprintf(stderr,
               "device: %s\ndata: %s, %zu bytes, vocab %lld; %lld training windows, %lld disjoint "
               "validation windows\n",
               device.c_str(), cli.get("data").c_str(), tokens.size(),
               static_cast<long long>(config.vocab), static_cast<long long>(train_w.count),
               static_cast<long long>(val_disjoint));

  graph::ParameterStore store(context);
  gpt::declareGpt(store, config);
  store.initialize(seed);
  graph::TrainerOptions options;
  options.batch = batch;
  options.optimizer.adamw.weight_decay = float(cli.getDouble("weight-decay", 0.0, 10.0));
  options.optimizer.max_grad_norm = 1.0f;
  options.dropout_seed = seed;
  options.profile = cli.has("profile");
  if (cli.get("schedule") == "cosine") {
    const int64_t warmup = std::min(cli.getInt("warmup", 0, int64_t(1) << 40), steps);
    options.schedule = graph::Schedule::cosine(lr, warmup, steps - warmup, lr / 10);
  } else if (cli.get("schedule") == "constant") {
    options.schedule = graph::Schedule::constant(lr);
  } else {
    cli.fail("--schedule must be cosine or constant");
  }
  const graph::LossFn loss = gpt::gptLossFn(store, config);
  graph::Trainer trainer(context, store, {&train_w.ids, &train_w.targets}, loss, options);
  // Validation: the same model over the held-out windows, a whole number of batches.
  // Its windows start ctx apart (disjoint); up to 8 batches of them, evenly spaced.
  graph::Trainer validator(context, store, {&val_w.ids, &val_w.targets}, loss, options);
  std::vector<uint32_t> val_rows = evenlySpaced(val_disjoint, std::max<int64_t>(batch, 8 * batch));
  for (uint32_t& r : val_rows) r *= uint32_t(ctx);
  while (int64_t(val_rows.size()) < batch)
    val_rows.push_back(val_rows[val_rows.size() % val_disjoint]);
  val_rows.resize(val_rows.size() / size_t(batch) * size_t(batch));
  std::printf(
      "model: %lld parameters; %lld layers, %lld heads, width %lld, context %lld, %s-norm\n",
      static_cast<long long>(store.elements()), static_cast<long long>(config.layers),
      static_cast<long long>(config.heads), static_cast<long long>(config.width),
      static_cast<long long>(ctx), norm.c_str());
  const double unigram = [&] {
    std::vector<double> count(size_t(config.vocab));
    for (uint32_t t : tokens) count[t] += 1;
    double h = 0;
    for (double c : count)
      if (c > 0) h -= c / double(tokens.size()) * std::log(c / double(tokens.size()));
    return h;
  }();
  std::printf("unigram entropy of the text: %.3f nats\n", unigram);

  std::vector<uint32_t> rows(static_cast<size_t>(batch));
  Series train_curve{"train", {}, {}, {31, 119, 180}, false};
  Series val_curve{"validation", {}, {}, {255, 127, 14}, true};
  // What a checkpoint keeps beside the trainer's state; rng picks every step's windows.
  RunState run{std::mt19937_64(seed), {&train_curve, &val_curve}, fingerprint(text)};
  // Training time leaves out validation: ms/step and tokens/s are the training steps' own.
  Clock::duration validating{};
  auto validate = [&](int64_t step) {
    const auto begin = Clock::now();
    const float v = validator.evaluate(val_rows);
    validating += Clock::now() - begin;
    val_curve.x.push_back(double(step));
    val_curve.y.push_back(v);
    return v;
  };
  float val = NAN, last_train = NAN;
  if (resumed) {
    readRunState(*resumed, resumed_from, run);
    trainer.loadState(*resumed, resumed_from);
    if (!train_curve.y.empty()) last_train = float(train_curve.y.back());
    if (!val_curve.y.empty()) val = float(val_curve.y.back());
    resumed.reset();  // its memory
    if (trainer.steps() >= steps)
      throw Error(resumed_from + ": the run is at step " + std::to_string(trainer.steps()) +
                  " of " + std::to_string(steps) + ": nothing to resume (a larger --steps?)");
    std::printf("resumed at step %lld of %lld from %s\n", static_cast<long long>(trainer.steps()),
                static_cast<long long>(steps), resumed_from.c_str());
  } else {
    val = validate(0);
  }
  const int64_t first = trainer.steps() + 1;
  const int64_t last = lastUnit(cli, first - 1, steps, "step");

  // A checkpoint: every file is replaced atomically, the training state first, so a crash at
  // any moment leaves a complete one (this save's or the last).
  auto save = [&](int64_t step) {
    trainer.saveState(out / kTrainStateFile, runMetadata(cli, kRun, "vkgrad-gpt", run));
    store.save(out / gpt::kModelFile, {{"vkgrad.step", std::to_string(step)}});
    gpt::GptCheckpoint cp{config, vocab};
    cp.training = {{"data", cli.get("data")},  {"steps", steps}, {"steps_done", step},
                   {"batch", batch},           {"lr", lr},       {"seed", seed},
                   {"train_loss", last_train}, {"val_loss", val}};
    gpt::writeConfig(out, cp);
    PlotOptions plot;
    plot.title = "vkgrad-gpt: loss";
    plot.x_label = "step";
    plot.y_label = "cross-entropy loss (nats)";
    writeLinePlot(out / "loss.png", {train_curve, val_curve}, plot);
  };

  const auto start = Clock::now();
  auto interval_start = start;
  auto interval_validating = validating;
  const auto validating_at_start = validating;
  for (int64_t s = first; s <= last; ++s) {
    for (auto& r : rows) r = uint32_t(run.rng() % uint64_t(train_w.count));
    const bool log = s % log_every == 0 || s == last;
    const std::optional<float> l = trainer.step(rows, /*read_loss=*/log);
    // Diverged: stop before anything is written, so DIR keeps whatever it held.
    if (l && !std::isfinite(*l))
      throw Error("step " + std::to_string(s) + ": the loss is " +
                  (std::isnan(*l) ? "NaN" : "infinite") +
                  "; training stopped and nothing more was saved (a smaller --lr?)");
    if (l) {
      last_train = *l;
      train_curve.x.push_back(double(s));
      train_curve.y.push_back(*l);
    }
    const bool evaluate = s == steps || (eval_every > 0 && s % eval_every == 0);
    if (evaluate) val = validate(s);
    if (log) {
      const auto now = Clock::now();
      const int64_t done =
          std::min<int64_t>(s - first + 1, s % log_every ? s % log_every : log_every);
      const double ms = std::chrono::duration<double, std::milli>(
                            now - interval_start - (validating - interval_validating))
                            .count() /
                        double(done);
      interval_start = now;
      interval_validating = validating;
      std::printf("step %6lld/%lld  loss %.4f%s  %8.1f ms/step  %9.0f tokens/s  lr %.2e",
                  static_cast<long long>(s), static_cast<long long>(steps), double(last_train),
                  evaluate ? ("  val " + std::to_string(val).substr(0, 6)).c_str() : "", ms,
                  double(batch * ctx) * 1000.0 / ms, double(trainer.learningRate()));
      if (cli.has("log-memory"))
        std::printf("  host RSS %.2f MiB  device %.2f MiB", double(hostResidentBytes()) / 1048576.0,
                    double(context.allocator().bytesInUse()) / 1048576.0);
      std::printf("\n");
      std::fflush(stdout);
    }
    if (s != last && save_every > 0 && s % save_every == 0) {
      const auto begin = Clock::now();
      save(s);
      validating += Clock::now() - begin;  // not training time either
    }
  }
  const int64_t ran = last - first + 1;
  const double seconds =
      std::chrono::duration<double>(Clock::now() - start - (validating - validating_at_start))
          .count();
  const double ms_per_step = seconds * 1000.0 / double(ran);
  const double tokens_per_s = double(batch * ctx * ran) / seconds;
  const uint64_t peak = context.allocator().peakBytesInUse();

  save(last);
  if (last < steps) {
    printStopped("vkgrad-gpt", out.string(), "step", last, steps);
    return validationFailed(context, "vkgrad-gpt") ? 1 : 0;
  }
  std::printf(
      "done: %lld steps in %.1f s, %.1f ms/step, %.0f tokens/s, peak device memory %.1f MiB\n"
      "final loss: train %.4f, val %.4f (unigram entropy %.3f)\nwrote %s/{%s, %s, loss.png, %s}\n",
      static_cast<long long>(ran), seconds, ms_per_step, tokens_per_s, double(peak) / 1048576.0,
      double(last_train), double(val), unigram, out.string().c_str(), gpt::kModelFile,
      gpt::kConfigFile, kTrainStateFile);
  if (options.profile)
    std::printf("GPU time of the last training step by op (%.1f ms in all, %u dispatches):\n%s",
                trainer.lastStepMilliseconds(), trainer.executor().dispatchCount(),
                graph::formatProfile(trainer.graph(), trainer.executor().profile()).c_str());
  if (json)
    std::printf("%s\n", graph::dumpJson({{"train_loss", last_train},
                                         {"val_loss", val},
                                         {"ms_per_step", ms_per_step},
                                         {"tokens_per_s", tokens_per_s},
                                         {"steps", steps},
                                         {"peak_device_bytes", peak},
                                         {"parameters", store.elements()},
                                         {"device", device}})
                            .c_str());
  return validationFailed(context, "vkgrad-gpt") ? 1 : 0;
}

int sample(int argc, char** argv) {
  Cli cli(
      "vkgrad-gpt sample",
      "Generates text from a checkpoint written by `vkgrad-gpt train`, sampling on the device.");
  cli.positional("sample", "the command");
  cli.option("checkpoint", "checkpoint directory (required)");
  cli.option("prompt", "text to continue (at most the model's context; only its bytes)", "\n");
  cli.option("tokens", "tokens (bytes) to generate", "200");
  cli.option("temperature", "softmax temperature (> 0)", "0.8");
  cli.option("top-k", "draw only from the k most likely tokens (0: all)", "0");
  cli.option("seed", "sampling seed", "1");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);
  if (cli.get("checkpoint").empty()) cli.fail("no --checkpoint directory given");
  const int64_t count = cli.getInt("tokens", 0, 1 << 24);
  ops::SampleOptions options;
  options.temperature = float(cli.getDouble("temperature", 1e-6, 1e6));
  options.top_k = cli.getInt("top-k", 0, 1 << 30);
  const uint64_t seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));

  const fs::path dir = cli.get("checkpoint");
  const gpt::GptCheckpoint cp = gpt::readConfig(dir);
  const std::string prompt = cli.get("prompt");
  if (prompt.empty()) cli.fail("--prompt must not be empty");
  std::vector<uint32_t> tokens = cp.vocab.encode(prompt);
  if (int64_t(tokens.size()) > cp.config.context)
    throw Error("the prompt is " + std::to_string(tokens.size()) +
                " bytes, longer than the model's context of " + std::to_string(cp.config.context) +
                " it was trained with");
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  gpt::declareGpt(store, cp.config);
  try {
    store.load(dir / gpt::kModelFile);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "\n(the checkpoint's model does not match its " +
                gpt::kConfigFile + ")");
  }
  gpt::Sampler sampler(context, store, cp.config, options, seed);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  for (int64_t i = 0; i < count; ++i) {
    const uint32_t next = sampler.next(tokens);
    tokens.push_back(next);
    const std::string byte = cp.vocab.decode(next);
    std::fwrite(byte.data(), 1, byte.size(), stdout);
    std::fflush(stdout);
  }
  std::printf("\n");
  return validationFailed(context, "vkgrad-gpt") ? 1 : 0;
}

const char* const kUsage =
    "usage: vkgrad-gpt train --data FILE [--layers N --heads N --width N --context N --batch N\n"
    "                        --steps N --lr X --seed N --out DIR --norm pre|post --device NAME "
    "--json]\n"
    "       vkgrad-gpt sample --checkpoint DIR --prompt TEXT --tokens N [--temperature X "
    "--top-k N --seed N]\n"
    "`vkgrad-gpt train --help` and `vkgrad-gpt sample --help` list every option.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain("vkgrad-gpt",
                     "vkgrad-gpt: trains a byte-level GPT on a text file and samples from it.",
                     kUsage, {{"train", train}, {"sample", sample}}, argc, argv);
}
