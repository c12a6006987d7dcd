// `vkgrad-gpt train --init DIR`: fine-tuning a Hugging Face folder, every weight (saved back in
// its layout) or low-rank adapters with the base frozen (--lora RANK, or --adapter DIR to go on
// from a PEFT adapter folder; saved in PEFT's layout, or folded into the weights with --merge).
// Everything is read and checked before a device is touched.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/cli.h"
#include "gpt/model_source.h"
#include "vkgrad/hf/lora.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::apps {

struct FineTune {
  ModelSource source;              // --init's folder
  std::optional<hf::HfLora> lora;  // the adapters trained, or none (every weight)
  bool merge = false;              // --merge: save the adapters folded in
};

// --lora, --lora-alpha, --lora-targets, --adapter, --merge (--init is declareModelOptions').
void declareFineTuneOptions(Cli& cli);
// The fine-tuning --init asks for, or none without --init. UsageError for a folder that is not
// a Hugging Face one, a LoRA option without --init or --lora, an unknown target or a rank out of
// range (hf::checkHfLora), --adapter with --lora's settings; Error from reading the folders.
std::optional<FineTune> fineTuneFromCli(const Cli& cli);
// The folder's model with --dropout; the options that shape a model are its own.
gpt::GptConfig fineTuneConfig(const Cli& cli, const FineTune& tune);
// The tokens per training window: --context N (at most the model's positions, UsageError naming
// both otherwise) or the model's own. The model keeps its positions (its whole position table,
// saved with its config unchanged): gptLogits reads the first N. Sets --context to the window,
// so that the run saves it for --resume.
int64_t fineTuneWindow(Cli& cli, const gpt::GptConfig& config);
// How the run declares its model, for the memory estimate (gpt::estimateTraining's declare):
// LoRA's frozen base in its stored format and the adapters; none (declareGpt: every weight a
// trained f32 master) for a full fine-tune.
std::function<void(graph::ParameterStore&)> fineTuneDeclare(const FineTune& tune);
// Declares and uploads the model (and the adapters, new ones drawn from seed) into store.
void loadFineTune(graph::ParameterStore& store, const FineTune& tune, uint64_t seed);
// One line on stderr about the adapters: rank, alpha, products, trainable parameters.
void printFineTune(const FineTune& tune, const graph::ParameterStore& store);
// Writes the trained model into dir: the whole folder (full, or adapters merged), or the
// adapters in PEFT's layout. Returns the names written.
std::vector<std::string> saveFineTune(const std::filesystem::path& dir, const FineTune& tune,
                                      const gpt::GptConfig& config,
                                      const graph::ParameterStore& store);

}  // namespace vkgrad::apps
