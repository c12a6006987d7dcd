// vkgrad-gpt: trains a character-level (byte-level) GPT on a text file (or a directory of
// them); samples from and evaluates it or a Hugging Face GPT-2, Llama or Qwen2 folder
// (gpt/inference.h).
// All model logic lives in models/gpt; this program parses options, reports progress and
// writes DIR/{model.safetensors, config.json, loss.png}.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/plot.h"
#include "common/resume.h"
#include "common/training_run.h"
#include "gpt/corpus.h"
#include "gpt/fine_tune.h"
#include "gpt/inference.h"
#include "gpt/model_source.h"
#include "gpt/options.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/checkpoint.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/vocab.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/memory_estimate.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// The options that define a training run besides the shared ones (common/training_run.h).
const std::vector<const char*> kFixed{
    "preset", "data", "layers", "heads", "width",      "context",      "batch",   "dropout",
    "norm",   "tie",  "init",   "lora",  "lora-alpha", "lora-targets", "adapter", "merge"};

// The shared options' defaults (common/training_run.h).
const RunDefaults kDefaults{.program = "vkgrad-gpt",
                            .rows = Rows::Random,
                            .length = "600",
                            .lr = "3e-3",
                            .schedule = "cosine",
                            .warmup = "30",
                            .weight_decay = "0.1",
                            .clip = "1",
                            .eval_every = "100",
                            .log_every = "20",
                            .save_every = "0",
                            .out = "gpt-out",
                            .blocks = true};

// A checkpoint's model file and config.json (what sample and eval read), with the run's
// settings and losses so far.
std::vector<std::string> saveModel(const fs::path& dir, int64_t step,
                                   const graph::ParameterStore& store, const TrainingRun& run,
                                   gpt::GptCheckpoint cp, const std::string& data, int64_t batch,
                                   float val) {
  store.save(dir / gpt::kModelFile, {{"vkgrad.step", std::to_string(step)}}, run.modelDtype());
  cp.training = {{"data", data},
                 {"steps", run.units()},
                 {"steps_done", step},
                 {"batch", batch},
                 {"lr", run.peakLr()},
                 {"seed", run.seed()},
                 {"train_loss", run.lastLoss()},
                 {"val_loss", val}};
  gpt::writeConfig(dir, cp);
  return {gpt::kModelFile, gpt::kConfigFile};
}

// The run's store: a new model from the seed, or --init's folder (fine_tune.h).
void loadModel(graph::ParameterStore& store, const gpt::GptConfig& config,
               const std::optional<FineTune>& tune, uint64_t seed) {
  if (tune) return loadFineTune(store, *tune, seed);
  gpt::declareGpt(store, config);
  store.initialize(seed);
}

// The run's hooks but save and finish: the data, its rate, the plot, and validation on
// val_rows into val and val_curve (which, with the trainer, must outlive the run).
RunHooks gptHooks(const Corpus& corpus, int64_t tokens_per_step, graph::Trainer& trainer,
                  const std::vector<uint32_t>& val_rows, Series& val_curve, float& val) {
  RunHooks hooks;
  hooks.data = fingerprint(corpus.text);
  hooks.items = "tokens";
  hooks.items_per_step = tokens_per_step;
  hooks.rate_key = "tokens_per_s";
  hooks.curves = {&val_curve};
  hooks.curves_file = "loss.png";
  hooks.plot = {
      .title = "vkgrad-gpt: loss", .x_label = "step", .y_label = "cross-entropy loss (nats)"};
  hooks.evaluate_first = true;
  hooks.evaluate = [&trainer, &val_rows, &val_curve, &val](int64_t step, const TrainStats&) {
    val = trainer.evaluate(val_rows);
    val_curve.x.push_back(double(step));
    val_curve.y.push_back(val);
    char line[32];
    return std::string(line, size_t(std::snprintf(line, sizeof line, "val %.4f", double(val))));
  };
  return hooks;
}

// `vkgrad-gpt train --help`'s description.
constexpr const char* kTrainHelp =
    "Trains a byte-level GPT on a text file or a directory of them (the first 90% trains,\n"
    "the rest validates) and writes DIR/model.safetensors, DIR/config.json, DIR/loss.png\n"
    "and DIR/train_state.safetensors (what --resume continues from). The device memory it\n"
    "needs is predicted first (--dry-run prints it); a run that cannot fit stops there.\n"
    "With --init DIR, fine-tunes every weight of a Hugging Face GPT-2 folder on the text\n"
    "(its tokenizer, windows of its context or of --context N tokens, N at most its\n"
    "positions, which it keeps) and writes the folder's layout instead:\n"
    "DIR/model.safetensors under GPT-2's names, config.json and the tokenizer files.\n"
    "With --init DIR --lora RANK, trains low-rank adapters with the folder's weights\n"
    "frozen and writes them in PEFT's layout (adapter_model.safetensors,\n"
    "adapter_config.json), or the merged model with --merge.";

int train(int argc, char** argv) {
  Cli cli("vkgrad-gpt train", kTrainHelp);
  cli.positional("train", "the command");
  declareModelOptions(cli);
  declareFineTuneOptions(cli);
  TrainingRun run(cli, kDefaults);
  cli.parse(argc, argv);
  applyPreset(cli);  // before the run reads its options: a preset sets --lr too
  run.parsed(kFixed);

  const Corpus corpus = readCorpus(cli.get("data"));
  // A Hugging Face folder (--init) brings its config, weights and tokenizer; otherwise the
  // model is the options' and its vocabulary the text's bytes.
  const std::optional<FineTune> tune = fineTuneFromCli(cli);
  std::optional<gpt::ByteVocab> vocab;
  if (!tune) vocab = gpt::ByteVocab::fromText(corpus.text);
  const gpt::GptConfig config =
      tune ? fineTuneConfig(cli, *tune) : configFromCli(cli, vocab->size());
  const int64_t batch = cli.getInt("batch", 1, 1 << 20);
  const int64_t ctx = tune ? fineTuneWindow(cli, config) : config.context;
  const std::vector<uint32_t> tokens =
      tune ? tune->source.encode(corpus.text, cli.get("data")) : vocab->encode(corpus.text);
  const auto [train_part, val_part] = splitText(tokens, ctx, cli.get("data"));
  // The windows of the whole text, stored once: training draws those whose targets lie in the
  // first 90%, validation reads windows that start after it.
  const int64_t train_windows = int64_t(train_part.size()) - ctx;
  // Validation rows come in whole steps, so --batch 4 --accumulate 4 validates as --batch 16.
  const std::vector<uint32_t> val_rows = validationRows(
      int64_t(val_part.size()) - ctx, ctx, batch * run.accumulate(), int64_t(train_part.size()));
  const graph::TrainerOptions options = run.trainerOptions(batch, train_windows);

  // Known before any of it is spent: a dry run reports it, a run that cannot fit stops here.
  std::unique_ptr<vk::Context> dry_device;
  if (cli.has("dry-run")) dry_device = std::make_unique<vk::Context>(contextOptions(cli));
  vk::Context& context = dry_device ? *dry_device : run.device();
  const graph::MemoryEstimate memory =
      gpt::estimateTraining(context, config, int64_t(tokens.size()), options,
                            tune ? fineTuneDeclare(*tune) : nullptr, ctx);
  const double unigram = unigramEntropy(tokens, config.vocab);
  gpt::GptConfig shown = config;  // the windows trained (--init --context N: shorter ones)
  shown.context = ctx;
  printHeader(context, cli, corpus.files, corpus.text.size(), train_windows, val_rows.size(),
              memory.parameter_count, shown, unigram);
  if (dry_device) {
    printDryRun(context, cli, memory);
    return validationFailed(context, "vkgrad-gpt") ? 1 : 0;
  }
  graph::checkMemoryFits(context, memory);

  const gpt::TokenWindows windows = gpt::uploadTokenWindows(context, tokens, ctx);
  graph::ParameterStore store(context);
  loadModel(store, config, tune, run.seed());
  if (tune) printFineTune(*tune, store);
  const graph::LossFn loss = gpt::gptLossFn(store, config);
  graph::Trainer trainer(context, store, {&windows.ids, &windows.targets}, loss, options);

  Series val_curve{"validation", {}, {}, {255, 127, 14}, true};
  float val = NAN;
  RunHooks hooks = gptHooks(corpus, batch * ctx, trainer, val_rows, val_curve, val);
  hooks.save = [&](const fs::path& dir, int64_t step) {
    if (tune) return saveFineTune(dir, *tune, config, store);
    return saveModel(dir, step, store, run, {config, *vocab}, cli.get("data"), batch, val);
  };
  hooks.finish = [&](graph::Json& json) {
    std::printf("final loss: train %.4f, val %.4f (unigram entropy %.3f)\n", double(run.lastLoss()),
                double(val), unigram);
    json.update({{"train_loss", run.lastLoss()},
                 {"val_loss", val},
                 {"parameters", store.elements()},
                 {"trained_parameters", store.trainableElements()}});
    return std::vector<std::string>{};
  };
  return run.train(trainer, hooks);
}

const char* const kUsage =
    "usage: vkgrad-gpt train --data FILE|DIR [--preset gpt2-small|mid --layers N --heads N\n"
    "                        --width N --context N --batch N --steps N --lr X --seed N --out DIR\n"
    "                        --norm pre|post --precision fp32|bf16|fp16 --device NAME --json\n"
    "                        --dry-run --init HF_DIR [--lora RANK --lora-alpha A\n"
    "                        --lora-targets LIST --adapter PEFT_DIR --merge]]\n"
    "       vkgrad-gpt sample --checkpoint DIR --prompt TEXT --tokens N [--temperature X "
    "--top-k N --seed N\n"
    "                         --kv-cache on|off --json]\n"
    "       vkgrad-gpt eval --checkpoint DIR --data FILE [--context N --json]\n"
    "A checkpoint DIR may also be a Hugging Face GPT-2, Llama or Qwen2 folder as downloaded,\n"
    "a PEFT adapter folder (its base_model_name_or_path), or a base folder with --adapter DIR.\n"
    "`vkgrad-gpt <command> --help` lists every option.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain(
      "vkgrad-gpt",
      "vkgrad-gpt: trains a byte-level GPT on a text file, samples from it and evaluates "
      "it; samples from, evaluates and fine-tunes Hugging Face GPT-2, Llama and Qwen2 folders.",
      kUsage, {{"train", train}, {"sample", sample}, {"eval", eval}}, argc, argv);
}
