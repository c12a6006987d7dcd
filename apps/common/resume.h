// Continuing a training run where it stopped: `train --resume DIR`. Beside its checkpoint a
// run keeps DIR/train_state.safetensors, graph::Trainer::saveState's file (parameters,
// optimizer and generator state, the step), whose metadata also holds what the app needs: the
// options that define the run, its host random generator, its curves so far and a fingerprint
// of its data. --resume reads that file back, takes the run's options into the command line
// (one given again must agree), and the app goes on from the saved step or epoch; the weights
// end the same, bit for bit, as a run that never stopped.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/cli.h"
#include "common/plot.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::apps {

inline constexpr const char* kTrainStateFile = "train_state.safetensors";

struct RunOptions {
  std::vector<const char*> fixed;   // model, data, optimizer, seed: must agree when given again
  std::vector<const char*> rhythm;  // how long, how often it evaluates and saves: may change
};

// Declares --resume DIR and --stop-at N (N counted in `unit`s: "step", "epoch").
void declareResumeOptions(Cli& cli, const char* unit);

// Call right after cli.parse(). With --resume DIR it reads DIR/train_state.safetensors
// (Error when it is missing or another program's), takes the saved options into cli
// (UsageError when a fixed one given again differs), makes --out default to DIR, and returns
// the file for the app's Trainer::loadState and readState. Without --resume: nullopt.
std::optional<graph::Checkpoint> resumeRun(Cli& cli, const RunOptions& run, const char* program);

// What an app keeps in the training state's metadata besides the options.
struct RunState {
  std::mt19937_64 rng;          // the host generator (batch order, shuffles)
  std::vector<Series*> curves;  // matched by label on reading
  std::string data;             // the data's fingerprint(); a resumed run refuses other data
};

// The metadata for Trainer::saveState: cli's values of the run's options and the state.
std::map<std::string, std::string> runMetadata(const Cli& cli, const RunOptions& run,
                                               const char* program, const RunState& state);
// Reads what runMetadata wrote into state (the curves it names get their points). Throws
// Error naming `where` when the data's fingerprint differs from state.data.
void readRunState(const graph::Checkpoint& saved, const std::string& where, RunState& state);

// The last step or epoch this session runs: --stop-at's, or `total`. UsageError when --stop-at
// is not after `done`, the ones a resumed run has behind it.
int64_t lastUnit(const Cli& cli, int64_t done, int64_t total, const char* unit);
// The line a run stopped by --stop-at ends with, saying how to go on.
void printStopped(const std::string& program, const std::string& out, const char* unit,
                  int64_t done, int64_t total);

// "N bytes, fnv1a <16 hex digits>" of the data a run trains on.
std::string fingerprint(std::span<const uint8_t> bytes);
inline std::string fingerprint(std::string_view text) {
  return fingerprint(std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace vkgrad::apps
