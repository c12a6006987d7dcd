#include "gpt/options.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::apps {
namespace {

std::vector<uint32_t> evenlySpaced(int64_t count, int64_t want) {
  std::vector<uint32_t> out;
  want = std::min(want, count);
  for (int64_t i = 0; i < want; ++i) out.push_back(uint32_t(i * count / want));
  return out;
}

}  // namespace

namespace {

// A preset's values, taken where the command line gives none.
struct Preset {
  const char* name;
  const char* about;
  std::vector<std::pair<const char*, const char*>> values;
};
const std::vector<Preset>& presets() {
  static const std::vector<Preset> kPresets = {
      // GPT-2 small's shape (12 layers, 12 heads, width 768, context 1024) on the byte
      // vocabulary: ~85 M parameters; GPT-2's peak learning rate.
      {"gpt2-small",
       "GPT-2 small: 12 layers, 12 heads, width 768, context 1024, batch 1",
       {{"layers", "12"},
        {"heads", "12"},
        {"width", "768"},
        {"context", "1024"},
        {"batch", "1"},
        {"lr", "6e-4"}}},
      // ~10.7 M parameters that train in minutes on lavapipe.
      {"mid",
       "6 layers, 6 heads, width 384, context 256, batch 8",
       {{"layers", "6"},
        {"heads", "6"},
        {"width", "384"},
        {"context", "256"},
        {"batch", "8"},
        {"lr", "1e-3"}}},
  };
  return kPresets;
}

}  // namespace

void applyPreset(Cli& cli) {
  const std::string name = cli.get("preset");
  if (name.empty()) return;
  for (const Preset& p : presets())
    if (name == p.name) {
      for (const auto& [option, value] : p.values)
        if (!cli.given(option)) cli.set(option, value, "--preset " + name);
      return;
    }
  std::string known;
  for (const Preset& p : presets()) known += std::string(known.empty() ? "" : ", ") + p.name;
  cli.fail("--preset " + name + " is not one of " + known);
}

void declareModelOptions(Cli& cli) {
  std::string about = "a model size; options given on the command line win:";
  for (const Preset& p : presets()) about += std::string(" ") + p.name + " (" + p.about + ");";
  cli.option("preset", about);
  cli.option("data",
             "the text to train on (required): a file, or a directory whose files are read in "
             "name order (not symlinks, hidden files or *.dat)");
  cli.option("layers", "transformer blocks", "2");
  cli.option("heads", "attention heads per block", "4");
  cli.option("width", "model width (a multiple of heads)", "64");
  cli.option("context", "tokens per window", "64");
  cli.option("batch", "windows per step", "16");
  cli.option("dropout", "dropout probability", "0");
  cli.option("norm", "pre (GPT-2) or post (the original transformer)", "pre");
  cli.flag("tie", "tie the output head to the token embedding");
  cli.option("init",
             "fine-tune a Hugging Face GPT-2 folder (config, weights and tokenizer from it; "
             "saved back in its layout) instead of a new model",
             "");
  cli.flag("dry-run",
           "print the device memory the run would take (parameters, gradients, optimizer state, "
           "activations, data) and exit without allocating it");
}

std::pair<std::span<const uint32_t>, std::span<const uint32_t>> splitText(
    std::span<const uint32_t> tokens, int64_t ctx, const std::string& name) {
  const int64_t split = int64_t(tokens.size()) * 9 / 10;
  if (split < ctx + 1 || int64_t(tokens.size()) - split < ctx + 1)
    throw Error(name + ": " + std::to_string(tokens.size()) + " tokens is too short for context " +
                std::to_string(ctx) +
                ": both the training part (90%) and the validation part (10%) need at least "
                "context + 1 tokens");
  return {tokens.first(size_t(split)), tokens.subspan(size_t(split))};
}

gpt::GptConfig configFromCli(const Cli& cli, int64_t vocab) {
  gpt::GptConfig config;
  config.vocab = vocab;
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
  return config;
}

// The entropy of the text's byte frequencies: the loss of a model that ignores context.
double unigramEntropy(std::span<const uint32_t> tokens, int64_t vocab) {
  std::vector<double> count(static_cast<size_t>(vocab));
  for (uint32_t t : tokens) count[t] += 1;
  double h = 0;
  for (double c : count)
    if (c > 0) h -= c / double(tokens.size()) * std::log(c / double(tokens.size()));
  return h;
}

std::vector<uint32_t> validationRows(int64_t windows, int64_t ctx, int64_t batch, int64_t first) {
  const int64_t disjoint = windows / ctx + (windows % ctx ? 1 : 0);
  std::vector<uint32_t> rows = evenlySpaced(disjoint, std::max<int64_t>(batch, 8 * batch));
  for (uint32_t& r : rows) r *= uint32_t(ctx);
  while (int64_t(rows.size()) < batch) rows.push_back(rows[rows.size() % disjoint]);
  rows.resize(rows.size() / size_t(batch) * size_t(batch));
  for (uint32_t& r : rows) r += uint32_t(first);
  return rows;
}

void printHeader(const vk::Context& context, const Cli& cli, size_t files, size_t bytes,
                 int64_t windows, size_t val_windows, int64_t parameters,
                 const gpt::GptConfig& config, double unigram) {
  const std::string from = files > 1 ? " (" + std::to_string(files) + " files)" : "";
  // A Llama's blocks are pre-norm RMSNorm; its own shape is its key/value heads and MLP.
  const std::string norm = config.llama ? "Llama: " + std::to_string(config.llama->kv_heads) +
                                              " key/value heads, MLP " +
                                              std::to_string(config.llama->intermediate) + ", RMS"
                                        : cli.get("norm");
  std::fprintf(stderr,
               "device: %s\ndata: %s%s, %zu bytes, vocab %lld; %lld training windows, %zu "
               "validation windows\nmodel: %lld parameters; %lld layers, %lld heads, width "
               "%lld, context %lld, %s-norm\nunigram entropy of the text: %.3f nats\n",
               context.info().name.c_str(), cli.get("data").c_str(), from.c_str(), bytes,
               static_cast<long long>(config.vocab), static_cast<long long>(windows), val_windows,
               static_cast<long long>(parameters), static_cast<long long>(config.layers),
               static_cast<long long>(config.heads), static_cast<long long>(config.width),
               static_cast<long long>(config.context), norm.c_str(), unigram);
}

void printDryRun(const vk::Context& context, const Cli& cli, const graph::MemoryEstimate& e) {
  std::printf("device memory of this run on %s, %s activations (predicted; nothing allocated):\n%s",
              context.info().name.c_str(), cli.get("precision").c_str(),
              graph::memoryTable(e).c_str());
  if (!cli.has("json")) return;
  const graph::Json json = {{"command", "train"},
                            {"dry_run", true},
                            {"device", context.info().name},
                            {"precision", cli.get("precision")},
                            {"parameters", e.parameter_count},
                            {"parameter_bytes", e.parameters},
                            {"gradient_bytes", e.gradients},
                            {"optimizer_bytes", e.optimizer},
                            {"activation_bytes", e.activations},
                            {"dataset_bytes", e.datasets},
                            {"other_bytes", e.other},
                            {"peak_device_bytes", e.peak()},
                            // The training graph's planned arena, as a real run reports it.
                            {"arena_bytes", e.arenas.at(0)}};
  std::printf("%s\n", graph::dumpJson(json).c_str());
}

void declareSampleOptions(Cli& cli) {
  cli.option("checkpoint", "checkpoint directory or Hugging Face model folder (required)");
  cli.option("adapter", "a PEFT LoRA adapter folder to run on the --checkpoint folder", "");
  cli.option("prompt", "text to continue (at most the model's context in tokens)", "\n");
  cli.option("tokens", "tokens to generate (bytes for a vkgrad-gpt checkpoint)", "200");
  cli.option("temperature", "softmax temperature (> 0)", "0.8");
  cli.option("top-k", "draw only from the k most likely tokens (0: all)", "0");
  cli.option("seed", "sampling seed", "1");
  cli.option("kv-cache",
             "on: keep each layer's keys and values on the device and run one row per token; "
             "off: run the whole window again for every token (the slow reference)",
             "on");
  cli.option("context",
             "tokens each draw sees at most (0: the model's context, at most " +
                 std::to_string(kDefaultWindow) + "; longer than the model's is refused)",
             "0");
  cli.flag("timing",
           "on stderr: ms per token at sequence positions 1, context/2 and context (the median "
           "of the generated tokens within 2 positions of each), and the median of every "
           "token after the first");
}

gpt::Decoding decodingFromCli(const Cli& cli) {
  const std::string kv_cache = cli.get("kv-cache");
  if (kv_cache != "on" && kv_cache != "off")
    cli.fail("--kv-cache must be on or off, not \"" + kv_cache + "\"");
  return kv_cache == "on" ? gpt::Decoding::Cached : gpt::Decoding::Window;
}

int64_t windowFromCli(const Cli& cli, int64_t model_context) {
  const int64_t window = cli.getInt("context", 0, INT64_MAX);
  if (window > model_context)
    cli.fail("--context " + std::to_string(window) + " is longer than the model's context of " +
             std::to_string(model_context));
  if (window > 0) return window;
  if (model_context <= kDefaultWindow) return model_context;
  std::fprintf(stderr,
               "note: windows of %lld tokens, not the model's context of %lld (--context N for "
               "longer ones)\n",
               static_cast<long long>(kDefaultWindow), static_cast<long long>(model_context));
  return kDefaultWindow;
}

void printTokenTimes(const std::vector<std::pair<size_t, double>>& token_ms, int64_t context) {
  std::string line = "ms per token", at_position = " at position";
  for (const int64_t at : {int64_t(1), std::max<int64_t>(1, context / 2), context}) {
    std::vector<double> near;
    for (const auto& [position, ms] : token_ms)
      if (std::llabs(int64_t(position) - at) <= 2) near.push_back(ms);
    if (near.empty()) continue;
    std::nth_element(near.begin(), near.begin() + ptrdiff_t(near.size() / 2), near.end());
    char text[64];
    std::snprintf(text, sizeof text, " %lld: %.3f", static_cast<long long>(at),
                  near[near.size() / 2]);
    line += at_position + text;
    at_position.clear();
  }
  // The steady rate: the first token also runs the prompt's rows.
  std::vector<double> after;
  for (size_t i = 1; i < token_ms.size(); ++i) after.push_back(token_ms[i].second);
  if (!after.empty()) {
    std::nth_element(after.begin(), after.begin() + ptrdiff_t(after.size() / 2), after.end());
    char text[64];
    std::snprintf(text, sizeof text, "%s median after the first: %.3f",
                  at_position.empty() ? ";" : "", after[after.size() / 2]);
    line += text;
  }
  std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace vkgrad::apps
