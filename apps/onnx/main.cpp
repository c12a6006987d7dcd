// vkgrad-onnx: ONNX models from PyTorch (or any exporter) on the device: inspect them, run
// them on .npy inputs, fine-tune their weights and write the model back.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/output_dir.h"
#include "common/progress.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/npy.h"
#include "vkgrad/onnx/fusions.h"
#include "vkgrad/onnx/importer.h"
#include "vkgrad/onnx/runner.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/profile.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;
using graph::Json;

onnx::HostTensor fromNpy(const graph::NpyArray& a) {
  if (a.kind == graph::NpyArray::Kind::Float) return onnx::HostTensor::ofFloats(a.shape, a.floats);
  return onnx::HostTensor::ofInts(a.shape, a.ints);
}

// --input NAME=FILE.npy, every one given.
std::map<std::string, onnx::HostTensor> readInputs(const Cli& cli) {
  std::map<std::string, onnx::HostTensor> inputs;
  for (const std::string& spec : cli.getAll("input")) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      cli.fail("--input takes NAME=FILE.npy, got '" + spec + "'");
    const std::string name = spec.substr(0, eq);
    if (inputs.count(name)) cli.fail("input " + name + " is given twice");
    inputs[name] = fromNpy(graph::readNpy(spec.substr(eq + 1)));
  }
  if (inputs.empty()) cli.fail("give the model's inputs with --input NAME=FILE.npy");
  return inputs;
}

onnx::Model loadModel(const Cli& cli) {
  if (cli.positionals().size() < 2) cli.fail("name the model: MODEL.onnx");
  return onnx::Model::load(cli.positionals()[1]);
}

// An output's file name: the ONNX name with path separators replaced.
std::string fileName(std::string name) {
  for (char& c : name)
    if (c == '/' || c == '\\' || c == ':') c = '_';
  return name + ".npy";
}

int info(int argc, char** argv) {
  Cli cli("vkgrad-onnx info",
          "Prints an ONNX model's inputs and outputs, its parameters, its op histogram, the\n"
          "patterns that fuse (where the input shapes allow: `run` says what did) and every\n"
          "node whose op vkgrad does not import.");
  cli.positional("info", "the command");
  cli.positional("MODEL.onnx", "the model");
  cli.flag("json", "print one JSON object instead of text");
  cli.parse(argc, argv);
  const onnx::Model model = loadModel(cli);
  int64_t params = 0, bytes = 0, count = 0;
  for (const std::string& name : model.initializerNames()) {
    const onnx::HostTensor* t = model.initializer(name);
    if (!t->isFloat()) continue;
    ++count;
    params += t->numel();
    bytes += t->numel() * 4;
  }
  const auto unsupported = onnx::unsupportedNodes(model);
  const auto ops = model.opHistogram();
  std::vector<std::string> fusions;  // found by structure; shapes checked when importing
  for (const auto& [node, fusion] : onnx::findFusions(model).at)
    fusions.push_back(fusion.description);
  if (cli.has("json")) {
    Json j{{"model", model.source()},      {"producer", model.producer()},
           {"opset", model.opset()},       {"nodes", model.nodeCount()},
           {"parameters", count},          {"parameter_elements", params},
           {"parameter_bytes_f32", bytes}, {"ops", ops},
           {"fusions", fusions},           {"unsupported", unsupported}};
    j["inputs"] = Json::array();
    j["outputs"] = Json::array();
    for (const auto& v : model.inputs()) j["inputs"].push_back(v.str());
    for (const auto& v : model.outputs()) j["outputs"].push_back(v.str());
    std::printf("%s\n", graph::dumpJson(j).c_str());
    return 0;
  }
  std::printf("%s: %s, opset %lld, %lld nodes\n", model.source().c_str(), model.producer().c_str(),
              static_cast<long long>(model.opset()), static_cast<long long>(model.nodeCount()));
  for (const auto& v : model.inputs()) std::printf("  input   %s\n", v.str().c_str());
  for (const auto& v : model.outputs()) std::printf("  output  %s\n", v.str().c_str());
  std::printf("parameters: %lld float initializers, %lld values (%.2f MiB as f32)\n",
              static_cast<long long>(count), static_cast<long long>(params),
              double(bytes) / (1 << 20));
  std::printf("ops:");
  for (const auto& [op, n] : ops) std::printf(" %s %d", op.c_str(), n);
  std::printf("\n");
  for (const auto& f : fusions) std::printf("fused: %s\n", f.c_str());
  if (unsupported.empty()) {
    std::printf("every op imports\n");
  } else {
    std::printf("unsupported (%zu nodes):\n", unsupported.size());
    for (const auto& u : unsupported) std::printf("  %s\n", u.c_str());
  }
  return unsupported.empty() ? 0 : 1;
}

int run(int argc, char** argv) {
  Cli cli("vkgrad-onnx run",
          "Runs an ONNX model on the device and writes every output as DIR/<name>.npy\n"
          "(float32). Integer inputs (token ids) may be int64 or int32 .npy files.");
  cli.positional("run", "the command");
  cli.positional("MODEL.onnx", "the model");
  cli.repeated("input", "NAME=FILE.npy: a model input");
  cli.option("out", "the folder to write the outputs to (required)");
  cli.option("precision", "fp32, bf16 or fp16: the activations' format", "fp32");
  cli.option("repeat", "run this many more times and report the median time of one", "0");
  cli.flag("no-fusion", "import every node as its own op (the fusions off: to compare)");
  cli.flag("json", "print one JSON object (outputs, shapes, time) instead of text");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);
  if (cli.get("out").empty()) cli.fail("--out DIR is required");
  const int64_t repeat = cli.getInt("repeat", 0, 100000);
  const graph::Precision precision = graph::parsePrecision(cli.get("precision"));
  const onnx::Model model = loadModel(cli);
  const auto inputs = readInputs(cli);
  vk::Context context(contextOptions(cli));
  onnx::Runner runner(context, model, precision, !cli.has("no-fusion"));
  const auto start = Clock::now();
  const std::vector<onnx::HostTensor> outputs = runner.run(inputs);
  const double seconds = secondsSince(start);  // the first run compiles the graph
  // Later runs of the same shapes replay it: inputs uploaded, one submission, outputs read.
  std::vector<double> times;
  for (int64_t i = 0; i < repeat; ++i) {
    const auto t = Clock::now();
    runner.run(inputs);
    times.push_back(secondsSince(t) * 1e3);
  }
  std::sort(times.begin(), times.end());
  const double median_ms = times.empty() ? 0.0 : times[times.size() / 2];
  // Written only once everything ran: a failure leaves --out as it was.
  const fs::path dir = cli.get("out");
  prepareOutput(dir);
  fs::create_directories(dir);
  Json written = Json::array();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string name = model.outputs()[i].name;
    graph::writeNpy(dir / fileName(name), outputs[i].dims, outputs[i].floats);
    written.push_back(
        {{"name", name}, {"file", (dir / fileName(name)).string()}, {"shape", outputs[i].dims}});
    if (!cli.has("json"))
      std::printf("wrote %s %s\n", (dir / fileName(name)).string().c_str(),
                  onnx::dimsText(outputs[i].dims).c_str());
  }
  if (cli.has("json"))
    std::printf("%s\n", graph::dumpJson(Json{{"outputs", written},
                                             {"seconds", seconds},
                                             {"median_ms", median_ms},
                                             {"dispatches", runner.dispatches()},
                                             {"fused", runner.imported().fusions},
                                             {"repeats", repeat},
                                             {"precision", cli.get("precision")}})
                            .c_str());
  else
    std::printf("%zu patterns fused, %u dispatches a run\n", runner.imported().fusions.size(),
                runner.dispatches());
  if (!cli.has("json") && repeat > 0)
    std::printf("median of %lld runs: %.3f ms\n", static_cast<long long>(repeat), median_ms);
  return validationFailed(context, "vkgrad-onnx") ? 1 : 0;
}

// train's options as parsed (--loss and --optimizer already checked).
onnx::FineTuneOptions fineTuneOptions(const Cli& cli, const std::string& loss,
                                      const std::string& opt) {
  onnx::FineTuneOptions options;
  options.loss = loss == "mse" ? onnx::Loss::Mse : onnx::Loss::CrossEntropy;
  options.output = cli.get("output");
  options.optimizer.kind =
      opt == "sgd" ? graph::OptimizerConfig::Kind::Sgd : graph::OptimizerConfig::Kind::AdamW;
  options.optimizer.sgd.momentum = 0.0f;
  options.optimizer.lr = float(cli.getDouble("lr", 0.0, 1e3));
  options.batch = cli.getInt("batch", 0, int64_t(1) << 31);
  options.freeze = cli.getAll("freeze");
  options.precision = graph::parsePrecision(cli.get("precision"));
  options.fuse = !cli.has("no-fusion");
  options.profile = cli.has("profile");
  return options;
}

// train's command line.
void declareTrainOptions(Cli& cli) {
  cli.positional("train", "the command");
  cli.positional("MODEL.onnx", "the model");
  cli.repeated("input", "NAME=FILE.npy: a model input, all rows");
  cli.option("target", "FILE.npy: float targets (mse) or integer class ids (cross-entropy)");
  cli.option("loss", "mse or cross-entropy", "mse");
  cli.option("output", "the output the loss reads (default: the model's first)");
  cli.option("optimizer", "sgd (plain: no momentum or weight decay) or adamw", "sgd");
  cli.option("lr", "learning rate", "0.01");
  cli.option("steps", "updates", "20");
  cli.option("batch", "rows per step; 0: all rows every step", "0");
  cli.repeated("freeze", "PATTERN: initializers matching it (* and ?) are not trained");
  cli.option("precision", "fp32, bf16 or fp16: the activations' format", "fp32");
  cli.flag("no-fusion", "import every node as its own op (the fusions off: to compare)");
  cli.flag("profile", "print the GPU time of the last step by op");
  cli.option("out", "the folder to write model.onnx to (required)");
  cli.flag("json", "print one JSON object per line, the last with every step's loss");
  declareDeviceOptions(cli);
}

// What train's steps measured.
struct TrainSteps {
  std::vector<double> losses;
  Clock::time_point start;  // before the first step
  double train_seconds;     // the steps alone, as vkgrad-gpt reports
  double median_ms;         // one step's, the first (which compiles) left out
};

// steps updates over the rows in file order, --batch at a time, wrapping around; the loss
// printed ten times along the way unless json.
TrainSteps trainSteps(onnx::FineTuner& tuner, int64_t steps, bool json) {
  std::vector<double> losses, step_ms;
  std::vector<uint32_t> rows(size_t(tuner.batch()));
  int64_t next = 0;
  const auto start = Clock::now();
  for (int64_t s = 0; s < steps; ++s) {
    for (auto& r : rows) r = uint32_t(next++ % tuner.rows());
    const auto step_start = Clock::now();
    losses.push_back(tuner.step(rows));
    if (s > 0) step_ms.push_back(secondsSince(step_start) * 1e3);  // the first one compiles
    if (!json && (s + 1 == steps || (s + 1) % std::max<int64_t>(1, steps / 10) == 0))
      std::printf("step %lld/%lld  loss %.6f  %s\n", static_cast<long long>(s + 1),
                  static_cast<long long>(steps), losses.back(),
                  duration(secondsSince(start)).c_str());
  }
  const double train_seconds = secondsSince(start);
  std::sort(step_ms.begin(), step_ms.end());
  const double median_ms = step_ms.empty() ? 0.0 : step_ms[step_ms.size() / 2];
  return {std::move(losses), start, train_seconds, median_ms};
}

int train(int argc, char** argv) {
  Cli cli("vkgrad-onnx train",
          "Fine-tunes an ONNX model's float initializers on the device and writes the model\n"
          "with the trained weights as DIR/model.onnx. Rows (the first axis of every input\n"
          "and of the target) are taken in file order, --batch at a time, wrapping around.");
  declareTrainOptions(cli);
  cli.parse(argc, argv);
  if (cli.get("out").empty()) cli.fail("--out DIR is required");
  if (cli.get("target").empty()) cli.fail("--target FILE.npy is required");
  const std::string loss = cli.get("loss"), opt = cli.get("optimizer");
  if (loss != "mse" && loss != "cross-entropy") cli.fail("--loss is mse or cross-entropy");
  if (opt != "sgd" && opt != "adamw") cli.fail("--optimizer is sgd or adamw");
  const onnx::FineTuneOptions options = fineTuneOptions(cli, loss, opt);
  const int64_t steps = cli.getInt("steps", 1, 10'000'000);
  const bool json = cli.has("json");
  const fs::path dir = cli.get("out");
  prepareOutput(dir);

  const onnx::Model model = loadModel(cli);
  const auto inputs = readInputs(cli);
  const onnx::HostTensor target = fromNpy(graph::readNpy(cli.get("target")));
  vk::Context context(contextOptions(cli));
  onnx::FineTuner tuner(context, model, inputs, target, options);
  const auto trained = tuner.trained();
  if (json)
    std::printf("%s\n",
                graph::dumpJson(
                    Json{{"rows", tuner.rows()}, {"batch", tuner.batch()}, {"trained", trained}})
                    .c_str());
  else
    std::printf("%lld rows, batch %lld, %zu initializers train\n",
                static_cast<long long>(tuner.rows()), static_cast<long long>(tuner.batch()),
                trained.size());
  const auto [losses, start, train_seconds, median_ms] = trainSteps(tuner, steps, json);
  fs::create_directories(dir);
  tuner.save(dir / "model.onnx");
  if (json)
    std::printf("%s\n", graph::dumpJson(Json{{"losses", losses},
                                             {"final_loss", losses.back()},
                                             {"model", (dir / "model.onnx").string()},
                                             {"seconds", secondsSince(start)},
                                             {"train_seconds", train_seconds},
                                             {"dispatches_per_step", tuner.dispatches()},
                                             {"median_step_ms", median_ms}})
                            .c_str());
  else
    std::printf("wrote %s (median step %.2f ms after the first)\n",
                (dir / "model.onnx").string().c_str(), median_ms);
  if (cli.has("profile")) {
    graph::Trainer& trainer = tuner.trainer();
    std::printf("GPU time of the last step by op (%.1f ms in all, %u dispatches):\n%s",
                trainer.lastStepMilliseconds(), trainer.executor().dispatchCount(),
                graph::formatProfile(trainer.graph(), trainer.executor().profile()).c_str());
  }
  return validationFailed(context, "vkgrad-onnx") ? 1 : 0;
}

const char* const kUsage =
    "usage: vkgrad-onnx info MODEL.onnx [--json]\n"
    "       vkgrad-onnx run MODEL.onnx --input NAME=FILE.npy [...] --out DIR\n"
    "       vkgrad-onnx train MODEL.onnx --input NAME=FILE.npy [...] --target FILE.npy\n"
    "                   [--loss mse|cross-entropy] [--steps N] [--lr X] --out DIR\n"
    "Each command takes --help.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain("vkgrad-onnx",
                     "vkgrad-onnx: import ONNX models, run them and fine-tune them on the device.",
                     kUsage, {{"info", info}, {"run", run}, {"train", train}}, argc, argv);
}
