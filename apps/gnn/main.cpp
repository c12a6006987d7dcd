// vkgrad-gnn: trains graph neural networks (the notes' graph convolution, GCN, GAT) on the
// device: node classification on Zachary's karate club, a stochastic block model or a user's
// edge list, and graph classification (graphs with or without a cycle, sum pooling). The
// models live in models/gnn; this program makes the data, reports progress and writes
// DIR/{model.safetensors, config.json, curves.png, graph.png}.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/graph_figure.h"
#include "common/output_dir.h"
#include "common/plot.h"
#include "common/progress.h"
#include "common/resume.h"
#include "vkgrad/gnn/datasets.h"
#include "vkgrad/gnn/gnn.h"
#include "vkgrad/graph/atomic_file.h"
#include "vkgrad/graph/json_io.h"
#include "vkgrad/graph/parameters.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// Rows of a node task: the labelled nodes (training) and the others (evaluation).
struct Split {
  std::vector<uint32_t> train, test;
};

// `per_class` labelled nodes of each class: for the karate club its two leaders (nodes 0 and
// 33, the usual choice) when per_class is 1, otherwise random nodes of each class.
Split splitNodes(const gnn::NodeData& d, int64_t per_class, uint64_t seed) {
  std::vector<uint32_t> order(size_t(d.nodes));
  std::iota(order.begin(), order.end(), 0u);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  if (d.name == "karate" && per_class == 1) order = {0, 33};
  std::vector<int64_t> taken(size_t(d.classes), 0);
  std::vector<bool> is_train(size_t(d.nodes), false);
  for (const uint32_t n : order)
    if (taken[d.labels[n]] < per_class) {
      ++taken[d.labels[n]];
      is_train[n] = true;
    }
  Split s;
  for (uint32_t n = 0; n < uint32_t(d.nodes); ++n) (is_train[n] ? s.train : s.test).push_back(n);
  return s;
}

// Graphs [first, last) of a set as one block-diagonal graph with segment offsets.
struct Batch {
  int64_t nodes = 0;
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  std::vector<float> features;
  std::vector<uint32_t> segments{0}, labels;
};
Batch batchOf(const gnn::GraphSet& set, size_t first, size_t last) {
  Batch b;
  for (size_t i = first; i < last; ++i) {
    const gnn::NodeData& g = set.graphs[i];
    for (const auto& [s, t] : g.edges)
      b.edges.emplace_back(uint32_t(b.nodes) + s, uint32_t(b.nodes) + t);
    b.features.insert(b.features.end(), g.features.begin(), g.features.end());
    b.nodes += g.nodes;
    b.segments.push_back(uint32_t(b.nodes));
    b.labels.push_back(set.labels[i]);
  }
  return b;
}

std::vector<uint32_t> iota(size_t n) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), 0u);
  return v;
}

graph::Dataset words(vk::Context& context, const std::string& name,
                     const std::vector<uint32_t>& values) {
  return graph::uploadDataset(context, name, {int64_t(values.size())}, values);
}

// The options that define a training run, and its rhythm (apps/common/resume.h).
const RunOptions kRun{{"model", "data", "layers", "hidden", "heads", "lr", "weight-decay",
                       "dropout", "labelled", "nodes", "communities", "degree-in", "degree-out",
                       "features", "noise", "graphs", "directed", "seed"},
                      {"epochs", "log-every"}};

int train(int argc, char** argv) {
  Cli cli("vkgrad-gnn train",
          "Trains a graph neural network on the device and writes DIR/model.safetensors,\n"
          "DIR/config.json, DIR/curves.png and, for graphs of up to 2000 nodes, DIR/graph.png\n"
          "(the graph drawn with nodes coloured by predicted class). --data karate, sbm or FILE\n"
          "is node classification (accuracy on the unlabelled nodes); cycles is graph\n"
          "classification (does a graph contain a cycle? accuracy on held-out graphs).\n"
          "DIR/train_state.safetensors is saved at every --log-every (what --resume continues "
          "from).");
  cli.positional("train", "the command");
  cli.option("model", "conv (the lecture notes' layer), gcn or gat", "gcn");
  cli.option("data", "karate, sbm, cycles, or an edge-list FILE (see --help of the README)",
             "karate");
  cli.option("layers", "graph layers", "2");
  cli.option("hidden", "hidden width (per head for gat)", "16");
  cli.option("heads", "attention heads of gat's hidden layers", "4");
  cli.option("epochs", "full-graph training steps", "200");
  cli.option("lr", "learning rate (Adam)", "0.01");
  cli.option("weight-decay", "decoupled weight decay (matrices only)", "5e-4");
  cli.option("dropout", "dropout on every layer's input while training", "0");
  cli.option("labelled", "labelled nodes per class (node tasks)", "1");
  cli.option("nodes", "sbm: nodes", "1000");
  cli.option("communities", "sbm: communities (classes)", "4");
  cli.option("degree-in", "sbm: expected neighbours inside a node's community", "8");
  cli.option("degree-out", "sbm: expected neighbours outside it", "2");
  cli.option("features", "sbm: feature width", "16");
  cli.option("noise", "sbm: feature noise (stddev; the centres are N(0, 1))", "2");
  cli.option("graphs", "cycles: graphs (80 % train, 20 % test)", "1000");
  cli.flag("directed", "FILE: edges are directed (default: each line is both directions)");
  cli.option("seed", "initialisation, data and split seed", "1");
  cli.option("log-every", "evaluate and print every N epochs", "10");
  cli.option("out", "checkpoint directory (created if missing)", "gnn-out");
  declareDeviceOptions(cli);
  cli.flag("profile",
           "time every node of the training step and print the last step's GPU time by op "
           "(a timestamp per node)");
  cli.flag("json", "end with one JSON line of results");
  declareResumeOptions(cli, "epoch");
  cli.parse(argc, argv);
  std::optional<graph::Checkpoint> resumed = resumeRun(cli, kRun, "vkgrad-gnn");

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
  const int64_t epochs = cli.getInt("epochs", 1, 1000000);
  const float lr = float(cli.getDouble("lr", 1e-8, 10.0));
  const float wd = float(cli.getDouble("weight-decay", 0.0, 10.0));
  const uint64_t seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));
  const int64_t log_every = cli.getInt("log-every", 1, 1000000);
  const std::string which = cli.get("data");
  const fs::path out = cli.get("out");

  // The data: one graph (node task) or train and test batches of graphs (graph task).
  gnn::NodeData node_data;
  gnn::GraphSet graph_set;
  const bool graph_task = which == "cycles";
  if (which == "karate") {
    node_data = gnn::karateClub();
  } else if (which == "sbm") {
    const int64_t nodes = cli.getInt("nodes", 2, int64_t(1) << 30);
    const int64_t communities = cli.getInt("communities", 2, 1024);
    const double per = double(nodes) / double(communities);
    const double in = cli.getDouble("degree-in", 0.0, 1e6),
                 out_deg = cli.getDouble("degree-out", 0.0, 1e6);
    if (per < 2) cli.fail("--nodes must be at least twice --communities");
    node_data = gnn::stochasticBlockModel(nodes, communities, std::min(1.0, in / (per - 1)),
                                          std::min(1.0, out_deg / (double(nodes) - per)),
                                          cli.getInt("features", 1, 4096),
                                          cli.getDouble("noise", 0.0, 1e6), seed);
  } else if (graph_task) {
    graph_set = gnn::cycleGraphs(cli.getInt("graphs", 10, 1000000), seed);
  } else {
    node_data = gnn::readEdgeList(which, cli.has("directed"));
    if (node_data.labels.empty())
      throw Error(which + ": no \"node <id> label <k>\" lines: nothing to classify");
  }
  prepareOutput(out);

  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  std::vector<gnn::GraphData> data;  // [0] trains; [1] evaluates (graph task), else [0] too
  std::vector<graph::Dataset> labels, train_ids, test_ids;
  std::vector<std::string> class_names;
  Split split;
  if (graph_task) {
    config.in = graph_set.graphs.at(0).feature_dim;
    config.classes = graph_set.classes;
    config.graph_level = true;
    class_names = graph_set.class_names;
    const size_t cut = graph_set.graphs.size() * 4 / 5;
    const Batch tr = batchOf(graph_set, 0, cut),
                te = batchOf(graph_set, cut, graph_set.graphs.size());
    data.push_back(gnn::uploadGraphData(context, "train", config.model, tr.nodes, tr.edges,
                                        tr.features, config.in, tr.segments));
    data.push_back(gnn::uploadGraphData(context, "test", config.model, te.nodes, te.edges,
                                        te.features, config.in, te.segments));
    labels = {words(context, "train.labels", tr.labels), words(context, "test.labels", te.labels)};
    train_ids = {words(context, "train.ids", iota(tr.labels.size()))};
    test_ids = {words(context, "test.ids", iota(te.labels.size()))};
  } else {
    config.in = node_data.feature_dim;
    config.classes = node_data.classes;
    class_names = node_data.class_names;
    split = splitNodes(node_data, cli.getInt("labelled", 1, int64_t(1) << 30), seed);
    if (split.test.empty()) cli.fail("--labelled leaves no unlabelled node to evaluate");
    data.push_back(gnn::uploadGraphData(context, node_data.name, config.model, node_data.nodes,
                                        node_data.edges, node_data.features,
                                        node_data.feature_dim));
    labels = {words(context, "labels", node_data.labels)};
    train_ids = {words(context, "train.ids", split.train)};
    test_ids = {words(context, "test.ids", split.test)};
  }
  try {
    config.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  gnn::declareGnn(store, config);
  store.initialize(seed);
  gnn::Trainer trainer(context, store, config, data[0], labels[0], train_ids[0], lr, wd, seed,
                       cli.has("profile"));
  gnn::Evaluator evaluator(context, store, config, data.back(), labels.back(), test_ids[0]);
  std::fprintf(stderr,
               "device: %s\ndata: %s: %lld nodes, %lld edges (with self-loops for gcn/gat)%s\n"
               "model: %s, %lld layers, hidden %lld%s, %lld parameters\n",
               context.info().name.c_str(), which.c_str(), static_cast<long long>(data[0].nodes),
               static_cast<long long>(data[0].adjacency.edges),
               graph_task ? ", graph classification" : "", gnn::modelName(config.model),
               static_cast<long long>(config.layers), static_cast<long long>(config.hidden),
               config.model == gnn::Model::Gat
                   ? (" x " + std::to_string(config.heads) + " heads").c_str()
                   : "",
               static_cast<long long>(store.elements()));

  Series loss_curve{"train loss", {}, {}, {31, 119, 180}, true};
  Series error_curve{"test error", {}, {}, {214, 39, 40}, true};
  // The graph the run trains on; no host generator draws after the data is made.
  const auto bytesOf = [](const auto& v) {
    return std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  RunState run{std::mt19937_64(seed),
               {&loss_curve, &error_curve},
               graph_task ? "cycles: " + std::to_string(graph_set.graphs.size()) + " graphs"
                          : "edges " + fingerprint(bytesOf(node_data.edges)) + "; features " +
                                fingerprint(bytesOf(node_data.features))};
  const std::string state_file = (out / kTrainStateFile).string();
  if (resumed) {
    const std::string where = (fs::path(cli.get("resume")) / kTrainStateFile).string();
    readRunState(*resumed, where, run);
    trainer.loadState(*resumed, where);
    resumed.reset();
    if (trainer.steps() >= epochs)
      throw Error(where + ": the run has done " + std::to_string(trainer.steps()) + " of " +
                  std::to_string(epochs) + " epochs: nothing to resume (a larger --epochs?)");
    std::printf("resumed after epoch %lld of %lld from %s\n",
                static_cast<long long>(trainer.steps()), static_cast<long long>(epochs),
                where.c_str());
  }
  const int64_t first = trainer.steps() + 1;
  const int64_t last = lastUnit(cli, first - 1, epochs, "epoch");
  double train_seconds = 0, gpu_ms = 0, accuracy = 0;
  const auto start = Clock::now();
  for (int64_t epoch = first; epoch <= last; ++epoch) {
    const bool log = epoch % log_every == 0 || epoch == last;
    const auto t0 = Clock::now();
    const float loss = trainer.step(log);
    train_seconds += secondsSince(t0);
    gpu_ms += trainer.lastStepMilliseconds();
    if (!log) continue;
    accuracy = gnn::accuracy(evaluator.confusion(), config.classes);
    loss_curve.x.push_back(double(epoch));
    loss_curve.y.push_back(loss);
    error_curve.x.push_back(double(epoch));
    error_curve.y.push_back(1.0 - accuracy);
    std::fprintf(stderr, "epoch %lld/%lld  loss %.4f  test accuracy %.2f%%  (%s)\n",
                 static_cast<long long>(epoch), static_cast<long long>(epochs), double(loss),
                 100.0 * accuracy, duration(secondsSince(start)).c_str());
    trainer.saveState(state_file, runMetadata(cli, kRun, "vkgrad-gnn", run));
  }
  if (last < epochs) {
    printStopped("vkgrad-gnn", out.string(), "epoch", last, epochs);
    return validationFailed(context, "vkgrad-gnn") ? 1 : 0;
  }
  const int64_t ran = last - first + 1;
  const double ms_per_epoch = 1000.0 * train_seconds / double(ran);

  store.save(out / "model.safetensors");
  const graph::Json cfg = {{"format", "vkgrad-gnn"},
                           {"version", 1},
                           {"model",
                            {{"model", gnn::modelName(config.model)},
                             {"in", config.in},
                             {"hidden", config.hidden},
                             {"classes", config.classes},
                             {"layers", config.layers},
                             {"heads", config.heads},
                             {"graph_level", config.graph_level}}},
                           {"class_names", class_names},
                           {"training",
                            {{"data", which},
                             {"epochs", epochs},
                             {"lr", lr},
                             {"seed", seed},
                             {"test_accuracy", accuracy}}}};
  graph::writeFileAtomically(out / "config.json", graph::dumpJson(cfg) + "\n");
  PlotOptions plot;
  plot.title = "vkgrad-gnn: training loss and test error";
  plot.x_label = "epoch";
  plot.y_label = "loss (nats) / test error (fraction)";
  plot.log_y = true;
  writeLinePlot(out / "curves.png", {loss_curve, error_curve}, plot);
  std::string pictures = "curves.png";
  if (!graph_task && node_data.nodes <= 2000) {
    const std::vector<uint32_t> predicted = evaluator.predictions();
    GraphPicture pic;
    pic.title = std::string("vkgrad-gnn ") + gnn::modelName(config.model) + " on " +
                node_data.name + ": test accuracy " +
                std::to_string(100.0 * accuracy).substr(0, 5) + "%";
    pic.positions = layoutGraph(node_data.nodes, node_data.edges, seed);
    pic.edges = node_data.edges;
    pic.class_names = class_names;
    pic.labelled.assign(size_t(node_data.nodes), false);
    pic.wrong.assign(size_t(node_data.nodes), false);
    for (const uint32_t n : split.train) pic.labelled[n] = true;
    for (int64_t n = 0; n < node_data.nodes; ++n) {
      pic.node_class.push_back(int(predicted[size_t(n)]));
      pic.wrong[size_t(n)] = predicted[size_t(n)] != node_data.labels[size_t(n)];
    }
    writeGraphPng(out / "graph.png", pic);
    pictures += ", graph.png";
  }
  std::printf(
      "done: %lld epochs, %.3f ms per epoch (wall; GPU %.3f), test accuracy %.2f%%, peak "
      "device memory %.2f MiB\nwrote %s/{model.safetensors, config.json, %s}\n",
      static_cast<long long>(epochs), ms_per_epoch, gpu_ms / double(ran), 100.0 * accuracy,
      double(context.allocator().peakBytesInUse()) / 1048576.0, out.string().c_str(),
      pictures.c_str());
  if (cli.has("profile"))
    std::printf("GPU time of the last training step by op (%.1f ms in all, %u dispatches):\n%s",
                trainer.lastStepMilliseconds(), trainer.dispatchCount(), trainer.profile().c_str());
  if (cli.has("json")) {
    const graph::Json result = {
        {"command", "train"},
        {"device", context.info().name},
        {"model", gnn::modelName(config.model)},
        {"data", which},
        {"nodes", data[0].nodes},
        {"edges", data[0].adjacency.edges},
        {"accuracy", accuracy},
        {"epochs", epochs},
        {"ms_per_epoch", ms_per_epoch},
        {"gpu_ms_per_epoch", gpu_ms / double(ran)},
        {"peak_device_mib", double(context.allocator().peakBytesInUse()) / 1048576.0}};
    std::printf("%s\n", graph::dumpJson(result).c_str());
  }
  return validationFailed(context, "vkgrad-gnn") ? 1 : 0;
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
