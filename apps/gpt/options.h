// vkgrad-gpt's own options (train's model, text and batch; sample's prompt and decoding), how
// the text is split, and what a run prints: train's header and --dry-run's memory report,
// sample's token times.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/gpt/sampler.h"
#include "vkgrad/training/memory_estimate.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

// --preset, --data, --layers, --heads, --width, --context, --batch, --dropout, --norm, --tie,
// --dry-run.
void declareModelOptions(Cli& cli);
// Right after parsing: --preset's values for the options not given (a resumed run then
// checks them against its saved ones like any option given).
// UsageError for an unknown preset.
void applyPreset(Cli& cli);
// The GptConfig the options give for a vocabulary of `vocab`; UsageError naming what is wrong.
gpt::GptConfig configFromCli(const Cli& cli, int64_t vocab);
// The first 90 % of the tokens (training) and the rest (validation); Error naming the file
// when either is shorter than a window and its target.
std::pair<std::span<const uint32_t>, std::span<const uint32_t>> splitText(
    std::span<const uint32_t> tokens, int64_t ctx, const std::string& name);
// The entropy of the text's byte frequencies: the loss of a model that ignores context.
double unigramEntropy(std::span<const uint32_t> tokens, int64_t vocab);
// Validation windows start ctx apart (disjoint): up to 8 batches of them, evenly spaced, a
// whole number of batches, numbered from `first` (the first held-out window of the stream).
std::vector<uint32_t> validationRows(int64_t windows, int64_t ctx, int64_t batch,
                                     int64_t first = 0);
// The device, the data (`files` files, `bytes` bytes) and the model, on stderr.
void printHeader(const vk::Context& context, const Cli& cli, size_t files, size_t bytes,
                 int64_t windows, size_t val_windows, int64_t parameters,
                 const gpt::GptConfig& config, double unigram);
// --dry-run's report on stdout: the predicted memory table (graph::memoryTable) and, with
// --json, one line of its numbers.
void printDryRun(const vk::Context& context, const Cli& cli, const graph::MemoryEstimate& estimate);

// vkgrad-gpt sample's options: --checkpoint, --adapter, --prompt, --tokens, --temperature, --top-k,
// --seed, --kv-cache, --context, --timing.
void declareSampleOptions(Cli& cli);
// The window sample and eval run when --context is 0: the model's context up to this many
// tokens. A Llama's or Qwen2's max_position_embeddings (8192, 32768) would otherwise size every
// eval window and the key/value cache, for a short prompt or text as much as for a long one.
constexpr int64_t kDefaultWindow = 2048;
// sample's and eval's --context: 0 gives min(model_context, kDefaultWindow), with a note on
// stderr when that is less than the model's; longer than model_context is a UsageError.
int64_t windowFromCli(const Cli& cli, int64_t model_context);
// --kv-cache's decoding; UsageError unless it is on or off.
gpt::Decoding decodingFromCli(const Cli& cli);
// --timing's line on stderr: milliseconds per token near sequence positions 1, context/2 and
// context, the median of the tokens drawn within 2 positions of each (positions the run did
// not reach are left out), then the median of every token after the first (whose time holds
// the prompt's rows too). token_ms: (the position drawn after, ms) per token.
void printTokenTimes(const std::vector<std::pair<size_t, double>>& token_ms, int64_t context);

}  // namespace vkgrad::apps
