#include "gnn/task.h"

#include <algorithm>
#include <numeric>
#include <random>
#include <span>
#include <utility>

#include "common/platform.h"
#include "common/resume.h"
#include "vkgrad/core/error.h"

namespace vkgrad::apps {
namespace {

// `per_class` labelled nodes of each class: for the karate club its two leaders (nodes 0 and
// 33, the usual choice) when per_class is 1, otherwise random nodes of each class.
void splitNodes(Task& task, int64_t per_class, uint64_t seed) {
  const gnn::NodeData& d = task.nodes;
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
  for (uint32_t n = 0; n < uint32_t(d.nodes); ++n)
    (is_train[n] ? task.train : task.test).push_back(n);
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

// A stochastic block model is made on the host: refuse one that cannot fit before making it.
void checkHostMemory(int64_t nodes, int64_t features, double degree) {
  // Features and labels per node; each expected edge as a pair, in both directions, and again
  // in the CSR built for the device.
  const double need = double(nodes) * (4.0 * double(features) + 8.0) + double(nodes) * degree * 32;
  const double have = double(physicalMemoryBytes());
  if (have > 0 && need > have / 2)
    throw Error("sbm: " + std::to_string(nodes) + " nodes with " + std::to_string(features) +
                " features and ~" + std::to_string(int64_t(degree)) +
                " neighbours each need about " + std::to_string(int64_t(need / double(1 << 30))) +
                " GiB of host memory; this "
                "machine has " +
                std::to_string(int64_t(have / double(1 << 30))) +
                " GiB (fewer --nodes or --features)");
}

template <typename T>
std::span<const uint8_t> bytesOf(const std::vector<T>& v) {
  return std::span(reinterpret_cast<const uint8_t*>(v.data()), v.size() * sizeof(T));
}

}  // namespace

void declareTaskOptions(Cli& cli) {
  cli.option("data", "karate, sbm, cycles, or an edge-list FILE (see --help of the README)",
             "karate");
  cli.option("labelled", "labelled nodes per class (node tasks)", "1");
  cli.option("nodes", "sbm: nodes", "1000");
  cli.option("communities", "sbm: communities (classes)", "4");
  cli.option("degree-in", "sbm: expected neighbours inside a node's community", "8");
  cli.option("degree-out", "sbm: expected neighbours outside it", "2");
  cli.option("features", "sbm: feature width", "16");
  cli.option("noise", "sbm: feature noise (stddev; the centres are N(0, 1))", "2");
  cli.option("graphs", "cycles: graphs (80 % train, 20 % test)", "1000");
  cli.flag("directed", "FILE: edges are directed (default: each line is both directions)");
}

Task readTask(const Cli& cli, uint64_t seed) {
  Task task;
  task.name = cli.get("data");
  if (task.name == "cycles") {
    task.graph_level = true;
    task.graphs = gnn::cycleGraphs(cli.getInt("graphs", 10, 1000000), seed);
    return task;
  }
  if (task.name == "karate") {
    task.nodes = gnn::karateClub();
  } else if (task.name == "sbm") {
    const int64_t nodes = cli.getInt("nodes", 2, int64_t(1) << 30);
    const int64_t communities = cli.getInt("communities", 2, 1024);
    const double per = double(nodes) / double(communities);
    const double in = cli.getDouble("degree-in", 0.0, 1e6),
                 out = cli.getDouble("degree-out", 0.0, 1e6);
    if (per < 2) cli.fail("--nodes must be at least twice --communities");
    checkHostMemory(nodes, cli.getInt("features", 1, 4096), in + out);
    task.nodes = gnn::stochasticBlockModel(nodes, communities, std::min(1.0, in / (per - 1)),
                                           std::min(1.0, out / (double(nodes) - per)),
                                           cli.getInt("features", 1, 4096),
                                           cli.getDouble("noise", 0.0, 1e6), seed);
  } else {
    task.nodes = gnn::readEdgeList(task.name, cli.has("directed"));
    if (task.nodes.labels.empty())
      throw Error(task.name + ": no \"node <id> label <k>\" lines: nothing to classify");
  }
  splitNodes(task, cli.getInt("labelled", 1, int64_t(1) << 30), seed);
  if (task.test.empty()) cli.fail("--labelled leaves no unlabelled node to evaluate");
  return task;
}

void configureFor(const Task& task, gnn::GnnConfig& config) {
  config.graph_level = task.graph_level;
  config.in = task.graph_level ? task.graphs.graphs.at(0).feature_dim : task.nodes.feature_dim;
  config.classes = task.graph_level ? task.graphs.classes : task.nodes.classes;
}

std::string fingerprintOf(const Task& task) {
  if (task.graph_level) return "cycles: " + std::to_string(task.graphs.graphs.size()) + " graphs";
  return "edges " + fingerprint(bytesOf(task.nodes.edges)) + "; features " +
         fingerprint(bytesOf(task.nodes.features));
}

const std::vector<std::string>& classNames(const Task& task) {
  return task.graph_level ? task.graphs.class_names : task.nodes.class_names;
}

void uploadTask(vk::Context& context, gnn::Model model, Task& task) {
  if (task.graph_level) {
    const int64_t in = task.graphs.graphs.at(0).feature_dim;
    const size_t count = task.graphs.graphs.size(), cut = count * 4 / 5;
    const Batch tr = batchOf(task.graphs, 0, cut), te = batchOf(task.graphs, cut, count);
    task.data.push_back(gnn::uploadGraphData(context, "train", model, tr.nodes, tr.edges,
                                             tr.features, in, tr.segments));
    task.data.push_back(gnn::uploadGraphData(context, "test", model, te.nodes, te.edges,
                                             te.features, in, te.segments));
    task.labels = {words(context, "train.labels", tr.labels),
                   words(context, "test.labels", te.labels)};
    task.train_ids = words(context, "train.ids", iota(tr.labels.size()));
    task.test_ids = words(context, "test.ids", iota(te.labels.size()));
    return;
  }
  const gnn::NodeData& d = task.nodes;
  task.data.push_back(
      gnn::uploadGraphData(context, d.name, model, d.nodes, d.edges, d.features, d.feature_dim));
  task.labels = {words(context, "labels", d.labels)};
  task.train_ids = words(context, "train.ids", task.train);
  task.test_ids = words(context, "test.ids", task.test);
}

}  // namespace vkgrad::apps
