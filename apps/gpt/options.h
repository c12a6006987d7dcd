// vkgrad-gpt train's own options (the model, its text and batch), how the text is split, and
// what a run prints before it trains: its header, and --dry-run's memory report.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/cli.h"
#include "vkgrad/gpt/gpt.h"
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

}  // namespace vkgrad::apps
