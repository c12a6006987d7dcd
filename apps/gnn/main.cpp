// vkgrad-gnn: trains graph neural networks (the notes' graph convolution, GCN, GAT) on the
// device: node classification on Zachary's karate club, a stochastic block model or a user's
// edge list, and graph classification (graphs with or without a cycle, sum pooling). The
// models live in models/gnn; this program makes the data, reports progress and writes
// DIR/{model.safetensors, config.json, curves.png, graph.png}.
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/graph_figure.h"
#include "common/plot.h"
#include "common/training_run.h"
#include "gnn/task.h"
#include "vkgrad/gnn/checkpoint.h"
#include "vkgrad/gnn/gnn.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// "96.88%": rounded, as every line of the run prints it.
std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * fraction);
  return text;
}

void declareModelOptions(Cli& cli) {
  cli.option("model", "conv (the lecture notes' layer), gcn or gat", "gcn");
  cli.option("layers", "graph layers", "2");
  cli.option("hidden", "hidden width (per head for gat)", "16");
  cli.option("heads", "attention heads of gat's hidden layers", "4");
  cli.option("dropout", "dropout on every layer's input while training", "0");
}

void printHeader(const vk::Context& context, const Task& task, const gnn::GnnConfig& config,
                 int64_t parameters) {
  std::fprintf(
      stderr,
      "device: %s\ndata: %s: %lld nodes, %lld edges (with self-loops for gcn/gat)%s\n"
      "model: %s, %lld layers, hidden %lld%s, %lld parameters\n",
      context.info().name.c_str(), task.name.c_str(), static_cast<long long>(task.data[0].nodes),
      static_cast<long long>(task.data[0].adjacency.edges),
      task.graph_level ? ", graph classification" : "", gnn::modelName(config.model),
      static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
      config.model == gnn::Model::Gat ? (" x " + std::to_string(config.heads) + " heads").c_str()
                                      : "",
      static_cast<long long>(parameters));
}

gnn::GnnConfig configFromCli(const Cli& cli) {
  gnn::GnnConfig config;
  try {
    config.model = gnn::modelFromName(cli.get("model"));
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  config.layers = cli.getInt("layers", 1, 16);
  config.hidden = cli.getInt("hidden", 1, 4096);
  config.heads = cli.getInt("heads", 1, 64);
  config.dropout = float(cli.getDouble("dropout", 0.0, 0.95));
  return config;
}

// DIR/graph.png: a node task's graph with every node coloured by its predicted class.
std::string writeGraphPicture(const fs::path& dir, const Task& task, const gnn::GnnConfig& config,
                              gnn::Evaluator& evaluator, double accuracy, uint64_t seed) {
  const gnn::NodeData& d = task.nodes;
  const std::vector<uint32_t> predicted = evaluator.predictions();
  GraphPicture pic;
  pic.title = std::string("vkgrad-gnn ") + gnn::modelName(config.model) + " on " + d.name +
              ": test accuracy " + percent(accuracy);
  pic.positions = layoutGraph(d.nodes, d.edges, seed);
  pic.edges = d.edges;
  pic.class_names = d.class_names;
  pic.labelled.assign(size_t(d.nodes), false);
  pic.wrong.assign(size_t(d.nodes), false);
  for (const uint32_t n : task.train) pic.labelled[n] = true;
  for (int64_t n = 0; n < d.nodes; ++n) {
    pic.node_class.push_back(int(predicted[size_t(n)]));
    pic.wrong[size_t(n)] = predicted[size_t(n)] != d.labels[size_t(n)];
  }
  writeGraphPng(dir / "graph.png", pic);
  return "graph.png";
}

// The options that define a training run besides the shared ones (common/training_run.h).
const std::vector<const char*> kFixed{
    "model",       "data",      "layers",     "hidden",   "heads", "dropout", "labelled", "nodes",
    "communities", "degree-in", "degree-out", "features", "noise", "graphs",  "directed"};

// The shared options' defaults (common/training_run.h).
const RunDefaults kDefaults{.program = "vkgrad-gnn",
                            .rows = Rows::All,
                            .length = "200",
                            .lr = "0.01",
                            .weight_decay = "5e-4",
                            .eval_every = "10",
                            .log_every = "10",
                            .save_every = "50",
                            .out = "gnn-out"};

int train(int argc, char** argv) {
  Cli cli("vkgrad-gnn train",
          "Trains a graph neural network on the device and writes DIR/model.safetensors,\n"
          "DIR/config.json, DIR/curves.png and, for graphs of up to 2000 nodes, DIR/graph.png\n"
          "(the graph drawn with nodes coloured by predicted class). --data karate, sbm or FILE\n"
          "is node classification (accuracy on the unlabelled nodes); cycles is graph\n"
          "classification (does a graph contain a cycle? accuracy on held-out graphs).\n"
          "Every epoch is one full-graph step.");
  cli.positional("train", "the command");
  declareModelOptions(cli);
  declareTaskOptions(cli);
  TrainingRun run(cli, kDefaults);
  cli.parse(argc, argv);
  run.parsed(kFixed);

  gnn::GnnConfig config = configFromCli(cli);
  Task task = readTask(cli, run.seed());
  configureFor(task, config);
  try {
    config.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  vk::Context& context = run.device();
  uploadTask(context, config.model, task);
  graph::ParameterStore store(context);
  gnn::declareGnn(store, config);
  store.initialize(run.seed());
  graph::Trainer trainer(context, store, {&task.train_ids},
                         gnn::gnnLossFn(store, config, task.data[0], task.labels[0]),
                         run.trainerOptions(0, task.train_ids.shape[0]));
  gnn::Evaluator evaluator(context, store, config, task.data.back(), task.labels.back(),
                           task.test_ids);
  printHeader(context, task, config, store.elements());

  Series error_curve{"test error", {}, {}, {214, 39, 40}, true};
  double accuracy = 0;
  RunHooks hooks;
  hooks.data = fingerprintOf(task);
  hooks.curves = {&error_curve};
  hooks.plot = {.title = "vkgrad-gnn: training loss and test error",
                .x_label = "epoch",
                .y_label = "loss (nats) / test error (fraction)",
                .log_y = true};
  hooks.evaluate = [&](int64_t epoch, const TrainStats&) {
    accuracy = gnn::accuracy(evaluator.confusion(), config.classes);
    error_curve.x.push_back(double(epoch));
    error_curve.y.push_back(1.0 - accuracy);
    return "test accuracy " + percent(accuracy);
  };
  hooks.save = [&](const fs::path& dir, int64_t epoch) {
    store.save(dir / gnn::kModelFile, {}, run.modelDtype());
    gnn::GnnCheckpoint cp{config, classNames(task)};
    cp.training = {{"data", task.name},  {"epochs", run.units()}, {"epochs_done", epoch},
                   {"lr", run.peakLr()}, {"seed", run.seed()},    {"test_accuracy", accuracy}};
    gnn::writeConfig(dir, cp);
    return std::vector<std::string>{gnn::kModelFile, gnn::kConfigFile};
  };
  hooks.finish = [&](graph::Json& json) {
    std::printf("test accuracy %s\n", percent(accuracy).c_str());
    json.update({{"model", gnn::modelName(config.model)},
                 {"data", task.name},
                 {"nodes", task.data[0].nodes},
                 {"edges", task.data[0].adjacency.edges},
                 {"accuracy", accuracy}});
    if (task.graph_level || task.nodes.nodes > 2000) return std::vector<std::string>{};
    return std::vector<std::string>{
        writeGraphPicture(run.out(), task, config, evaluator, accuracy, run.seed())};
  };
  return run.train(trainer, hooks);
}

const char* const kUsage =
    "usage: vkgrad-gnn train [--model conv|gcn|gat] [--data karate|sbm|cycles|FILE] [options]\n"
    "`vkgrad-gnn train --help` lists every option.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain("vkgrad-gnn", "vkgrad-gnn: graph neural networks trained on the device.",
                     kUsage, {{"train", train}}, argc, argv);
}
