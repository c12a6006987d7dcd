#include "gpt/fine_tune.h"

#include <cstdio>
#include <sstream>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/nn/lora.h"

namespace vkgrad::apps {

namespace {

namespace fs = std::filesystem;

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

constexpr const char* kDefaultAlpha = "8";
// No targets named: the model's (hf::defaultLoraTargets).
constexpr const char* kDefaultTargets = "";

// The LoRA options set to something else than their defaults. By value, not by what the line
// gave: a resumed run has every saved option set (TrainingRun::parsed).
std::vector<std::string> loraOptionsSet(const Cli& cli) {
  std::vector<std::string> out;
  if (cli.get("lora") != "0") out.push_back("--lora");
  if (cli.getDouble("lora-alpha", 1e-6, 1e6) != std::stod(kDefaultAlpha))
    out.push_back("--lora-alpha");
  if (cli.get("lora-targets") != kDefaultTargets) out.push_back("--lora-targets");
  return out;
}

// --lora's (or --adapter's) adapters; none for a full fine-tune.
std::optional<hf::HfLora> loraFromCli(const Cli& cli, const hf::HfModel& model,
                                      const fs::path& base) {
  const int64_t rank = cli.getInt("lora", 0, int64_t(1) << 20);
  const std::string adapter = cli.get("adapter");
  if (rank == 0 && adapter.empty()) {
    for (const std::string& option : loraOptionsSet(cli))
      cli.fail(option + " needs --lora or --adapter");
    if (cli.has("merge")) cli.fail("--merge needs --lora or --adapter");
    return std::nullopt;
  }
  hf::HfLora lora;
  if (!adapter.empty()) {
    for (const std::string& option : loraOptionsSet(cli))
      cli.fail(option + " is the adapter's own with --adapter (" + hf::kAdapterConfigFile + ")");
    lora = hf::readHfLora(adapter, model);
  } else {
    lora.config.rank = rank;
    lora.config.alpha = float(cli.getDouble("lora-alpha", 1e-6, 1e6));
    lora.targets = splitList(cli.get("lora-targets"));
    if (lora.targets.empty()) lora.targets = hf::defaultLoraTargets(model);
  }
  lora.base = fs::absolute(base).lexically_normal().string();
  try {
    hf::checkHfLora(model, lora);
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  return lora;
}

}  // namespace

void declareFineTuneOptions(Cli& cli) {
  cli.option("lora",
             "with --init: train low-rank adapters of this rank on the products --lora-targets "
             "names, the folder's weights frozen, and save them in PEFT's layout "
             "(adapter_model.safetensors, adapter_config.json); 0: fine-tune every weight",
             "0");
  cli.option("lora-alpha", "the adapters' alpha: they add (alpha / rank) x A B (PEFT's default)",
             kDefaultAlpha);
  cli.option("lora-targets",
             "comma-separated module names the adapters go on, PEFT's target_modules (a name "
             "selects every module it ends: c_proj is attn.c_proj and mlp.c_proj); empty: every "
             "product (GPT-2: c_attn,c_proj,c_fc; Llama, Qwen2: q_proj,k_proj,v_proj,o_proj,"
             "gate_proj,up_proj,down_proj)",
             kDefaultTargets);
  cli.option("adapter",
             "with --init: go on training this PEFT adapter folder (its rank, alpha, targets and "
             "values)",
             "");
  cli.flag("merge",
           "with --lora or --adapter: save the whole model with the adapters folded into its "
           "weights (the --init folder's layout) instead of the adapters");
}

std::optional<FineTune> fineTuneFromCli(const Cli& cli) {
  if (cli.get("init").empty()) {
    std::vector<std::string> set = loraOptionsSet(cli);
    if (!cli.get("adapter").empty()) set.push_back("--adapter");
    if (cli.has("merge")) set.push_back("--merge");
    if (!set.empty()) cli.fail(set.front() + " needs --init");
    return std::nullopt;
  }
  if (hf::isHfAdapterFolder(cli.get("init")) && !hf::isHfFolder(cli.get("init")))
    cli.fail("--init " + cli.get("init") + " is an adapter folder: give --init BASE --adapter " +
             cli.get("init"));
  FineTune tune{readModelSource(cli.get("init")), std::nullopt, cli.has("merge")};
  if (!tune.source.huggingFace())
    cli.fail("--init " + cli.get("init") +
             " is not a Hugging Face model folder (config.json with a model_type)");
  tune.lora = loraFromCli(cli, *tune.source.hf, tune.source.dir);
  return tune;
}

gpt::GptConfig fineTuneConfig(const Cli& cli, const FineTune& tune) {
  // Given on the line, not set from a resumed run's saved options (which hold the defaults).
  for (const char* option : {"preset", "layers", "heads", "width", "norm", "tie"})
    if (cli.given(option) && cli.origin(option).empty())
      cli.fail(std::string("--") + option + " is the model's own with --init (its config.json)");
  gpt::GptConfig config = tune.source.config;
  config.dropout = float(cli.getDouble("dropout", 0.0, 0.99));
  return config;
}

int64_t fineTuneWindow(Cli& cli, const gpt::GptConfig& config) {
  // Given on the line, or saved by the run resumed (which saved the window it chose, below).
  int64_t window = config.context;
  if (cli.given("context")) {
    window = cli.getInt("context", 1, gpt::kMaxContext);
    if (window > config.context)
      cli.fail("--context " + std::to_string(window) + " is longer than the model's " +
               std::to_string(config.context) + " positions (its config.json)");
  }
  // Saved with the run's options, so that --resume trains the same windows.
  cli.set("context", std::to_string(window));
  return window;
}

std::function<void(graph::ParameterStore&)> fineTuneDeclare(const FineTune& tune) {
  if (!tune.lora) return {};
  // The base declared frozen in its stored format, as loadHfLora declares it: a table that
  // binds only in 16 bits is not refused in f32.
  return [&tune](graph::ParameterStore& store) {
    hf::declareHfModel(store, *tune.source.hf, /*frozen=*/true);
    hf::adaptHfLora(store, *tune.source.hf, *tune.lora, /*train=*/true);
  };
}

void loadFineTune(graph::ParameterStore& store, const FineTune& tune, uint64_t seed) {
  if (tune.lora)
    hf::loadHfLora(store, *tune.source.hf, *tune.lora, /*train=*/true, seed);
  else
    hf::loadHfModel(store, *tune.source.hf, /*frozen=*/false);  // trained: f32 masters
}

void printFineTune(const FineTune& tune, const graph::ParameterStore& store) {
  if (!tune.lora) return;
  std::string targets;
  for (const std::string& t : tune.lora->targets) targets += (targets.empty() ? "" : ",") + t;
  std::fprintf(stderr,
               "LoRA: rank %lld, alpha %g (scale %g) on %zu modules (%s); %lld of %lld "
               "parameters trained, the rest frozen\n",
               static_cast<long long>(tune.lora->config.rank), double(tune.lora->config.alpha),
               double(tune.lora->config.scale()),
               hf::selectLinears(hf::hfLinears(*tune.source.hf), tune.lora->targets).size(),
               targets.c_str(), static_cast<long long>(store.trainableElements()),
               static_cast<long long>(store.elements()));
}

std::vector<std::string> saveFineTune(const fs::path& dir, const FineTune& tune,
                                      const gpt::GptConfig& config,
                                      const graph::ParameterStore& store) {
  if (!tune.lora) return hf::saveHfModel(dir, tune.source.dir, config, store);
  if (tune.merge)
    return hf::saveHfModel(dir, tune.source.dir, config, nn::mergeLora(store.download()));
  return hf::saveHfLora(dir, *tune.source.hf, *tune.lora, store);
}

}  // namespace vkgrad::apps
