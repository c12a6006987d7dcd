#include "vkgrad/gnn/gnn.h"

#include <cmath>

#include "vkgrad/core/error.h"
#include "vkgrad/nn/layers.h"
#include "vkgrad/ops/segment_pool.h"
#include "vkgrad/runtime/ops/confusion.h"
#include "vkgrad/runtime/ops/edge_softmax.h"
#include "vkgrad/runtime/ops/segment_pool.h"
#include "vkgrad/runtime/ops/spmm.h"

namespace vkgrad::gnn {

using graph::Graph;
using graph::Init;
using graph::Tensor;

const char* modelName(Model model) {
  switch (model) {
    case Model::Conv:
      return "conv";
    case Model::Gcn:
      return "gcn";
    case Model::Gat:
      return "gat";
  }
  return "?";
}

Model modelFromName(const std::string& name) {
  if (name == "conv") return Model::Conv;
  if (name == "gcn") return Model::Gcn;
  if (name == "gat") return Model::Gat;
  throw Error("unknown model '" + name + "' (conv, gcn or gat)");
}

void GnnConfig::validate() const {
  auto fail = [](const std::string& why) { throw Error("GnnConfig: " + why); };
  if (in <= 0 || in > 65536) fail("in " + std::to_string(in) + " is not in [1, 65536]");
  if (hidden <= 0 || hidden > 4096)
    fail("hidden " + std::to_string(hidden) + " is not in [1, 4096]");
  if (classes < 2 || classes > 65536) fail("classes must be in [2, 65536]");
  if (layers < 1 || layers > 16) fail("layers " + std::to_string(layers) + " is not in [1, 16]");
  if (!(dropout >= 0.0f && dropout < 1.0f)) fail("dropout must be in [0, 1)");
  if (heads < 1 || heads > 64) fail("heads " + std::to_string(heads) + " is not in [1, 64]");
}

int64_t GnnConfig::width(int64_t layer) const {
  const bool last = layer == layers - 1;
  if (last && !graph_level) return classes;
  return model == Model::Gat ? heads * hidden : hidden;
}

namespace {

std::string layerName(int64_t i) {
  return "l" + std::to_string(i);
}

// GAT's heads in layer i: the hidden layers concatenate `heads`, a node-level output layer
// has one.
int64_t headsOf(const GnnConfig& c, int64_t i) {
  if (c.model != Model::Gat) return 1;
  return i == c.layers - 1 && !c.graph_level ? 1 : c.heads;
}

// The per-head feature width of layer i's output.
int64_t headWidth(const GnnConfig& c, int64_t i) {
  return c.width(i) / headsOf(c, i);
}

}  // namespace

void declareGnn(graph::ParameterStore& store, const GnnConfig& config) {
  config.validate();
  int64_t in = config.in;
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string name = layerName(i);
    const int64_t out = config.width(i);
    store.add(name + ".w", {in, out}, Init::xavierUniform());
    store.add(name + ".b", {out}, Init::zeros());
    if (config.model == Model::Conv) store.add(name + ".w2", {in, out}, Init::xavierUniform());
    if (config.model == Model::Gat) {
      // a_src, a_dst as (H*D, H) matrices of which only the block diagonal is used (the
      // graph masks the rest), so each head's score is one matmul.
      const int64_t h = headsOf(config, i);
      store.add(name + ".a_src", {out, h}, Init::xavierUniform());
      store.add(name + ".a_dst", {out, h}, Init::xavierUniform());
    }
    in = out;
  }
  if (config.graph_level) nn::declareLinear(store, "head", in, config.classes);
}

GraphData uploadGraphData(vk::Context& context, const std::string& name, Model model, int64_t nodes,
                          const std::vector<std::pair<uint32_t, uint32_t>>& edges,
                          const std::vector<float>& features, int64_t feature_dim,
                          const std::vector<uint32_t>& segments) {
  if (nodes <= 0 || feature_dim <= 0 || int64_t(features.size()) != nodes * feature_dim)
    throw Error("graph " + name + ": " + std::to_string(features.size()) + " features for " +
                std::to_string(nodes) + " nodes of " + std::to_string(feature_dim));
  GraphData d;
  d.name = name;
  d.nodes = nodes;
  std::vector<std::pair<uint32_t, uint32_t>> all = edges;
  if (model != Model::Conv)  // A + I
    for (int64_t i = 0; i < nodes; ++i) all.emplace_back(uint32_t(i), uint32_t(i));
  const graph::Csr csr = graph::csrFromEdges(name, nodes, all);
  d.adjacency = graph::uploadGraph(context, name, csr);
  if (model == Model::Gcn) {
    std::vector<double> degree(size_t(nodes), 0.0);  // in-degree with the self-loop
    for (int64_t j = 0; j < nodes; ++j)
      degree[size_t(j)] = double(csr.offsets[size_t(j + 1)] - csr.offsets[size_t(j)]);
    const std::vector<uint32_t> dst = csr.destinations();
    std::vector<float> w(csr.sources.size());
    for (size_t e = 0; e < w.size(); ++e)
      w[e] = float(1.0 / std::sqrt(degree[csr.sources[e]] * degree[dst[e]]));
    d.gcn_weights = graph::uploadDataset(context, name + ".gcn_weights", {int64_t(w.size())}, w);
  }
  d.features = graph::uploadDataset(context, name + ".features", {nodes, feature_dim}, features);
  if (!segments.empty()) {
    if (segments.front() != 0 || segments.back() != uint32_t(nodes))
      throw Error("graph " + name + ": segments must run from 0 to the node count");
    for (size_t g = 1; g < segments.size(); ++g)
      if (segments[g] < segments[g - 1])
        throw Error("graph " + name + ": segments[" + std::to_string(g) + "] decreases");
    d.graphs = int64_t(segments.size()) - 1;
    d.segments = graph::uploadDataset(context, name + ".segments", {d.graphs + 1}, segments);
  }
  return d;
}

Tensor gnnLogits(Graph& g, const graph::ParameterStore& store, const GnnConfig& config,
                 const GraphData& data) {
  config.validate();
  if (config.graph_level && data.graphs == 0)
    throw Error("gnnLogits: graph " + data.name + " has no segments for graph classification");
  Tensor x = g.dataset(data.features);
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string name = layerName(i);
    const bool last = i == config.layers - 1;
    const Tensor w = g.parameter(store.at(name + ".w")), b = g.parameter(store.at(name + ".b"));
    x = g.dropout(x, config.dropout);  // x itself in evaluation graphs
    Tensor h;
    switch (config.model) {
      case Model::Conv:  // theta1^T x_j + sum over neighbours of theta2^T x_i
        h = g.add(g.matmul(x, w, b),
                  graph::spmm(g, data.adjacency, g.matmul(x, g.parameter(store.at(name + ".w2")))));
        break;
      case Model::Gcn:
        h = g.add(graph::spmm(g, data.adjacency, g.matmul(x, w), g.dataset(data.gcn_weights)), b);
        break;
      case Model::Gat: {
        const int64_t heads = headsOf(config, i), width = config.width(i);
        const int64_t d = headWidth(config, i);
        const Tensor z = g.matmul(x, w);  // (N, H*D)
        std::vector<float> mask(size_t(width * heads), 0.0f);
        for (int64_t r = 0; r < width; ++r) mask[size_t(r * heads + r / d)] = 1.0f;
        const Tensor m = g.constant(name + ".mask", {width, heads}, mask);
        const Tensor s_src = g.matmul(z, g.mul(g.parameter(store.at(name + ".a_src")), m));
        const Tensor s_dst = g.matmul(z, g.mul(g.parameter(store.at(name + ".a_dst")), m));
        const Tensor e =
            g.activation(g.add(g.gather(s_src, g.dataset(data.adjacency.sources)),
                               g.gather(s_dst, g.dataset(data.adjacency.destinations))),
                         ops::Activation::LeakyRelu, 0.2f);  // (E, H)
        h = g.add(graph::spmm(g, data.adjacency, z, graph::edgeSoftmax(g, data.adjacency, e)), b);
        break;
      }
    }
    if (!last || config.graph_level)
      h = config.model == Model::Gat ? g.activation(h, ops::Activation::Elu, 1.0f) : g.relu(h);
    x = h;
  }
  if (!config.graph_level) return x;
  return nn::linear(g, store, "head",
                    graph::segmentPool(g, x, g.dataset(data.segments), ops::Pool::Sum));
}

namespace {

// The logits' rows `ids` and their labels.
std::pair<Tensor, Tensor> picked(Graph& g, Tensor logits, const graph::Dataset& labels,
                                 const graph::Dataset& ids) {
  const Tensor rows = g.dataset(ids);
  return {g.gather(logits, rows), g.gather(g.dataset(labels), rows)};
}

}  // namespace

graph::LossFn gnnLossFn(const graph::ParameterStore& store, const GnnConfig& config,
                        const GraphData& data, const graph::Dataset& labels) {
  return [&store, config, &data, &labels](Graph& g, std::span<const Tensor> batch) {
    const Tensor logits = gnnLogits(g, store, config, data);
    return g.crossEntropy(g.gather(logits, batch[0]), g.gather(g.dataset(labels), batch[0]));
  };
}

Evaluator::Evaluator(vk::Context& context, const graph::ParameterStore& store,
                     const GnnConfig& config, const GraphData& data, const graph::Dataset& labels,
                     const graph::Dataset& ids)
    : classes_(config.classes) {
  g_.setTraining(false);
  logits_ = gnnLogits(g_, store, config, data);
  const auto [rows, targets] = picked(g_, logits_, labels, ids);
  counts_ = graph::confusion(g_, rows, targets);
  g_.markOutput(counts_);
  g_.markOutput(logits_);
  exec_ = std::make_unique<graph::Executor>(context, g_);
}

Evaluator::~Evaluator() = default;

std::vector<uint32_t> Evaluator::confusion() {
  exec_->step();
  return exec_->readWords(counts_);
}

std::vector<uint32_t> Evaluator::predictions() {
  exec_->step();
  const std::vector<float> logits = exec_->read(logits_);
  std::vector<uint32_t> out(logits.size() / size_t(classes_));
  for (size_t r = 0; r < out.size(); ++r) {
    const float* row = logits.data() + r * size_t(classes_);
    uint32_t best = 0;
    for (uint32_t c = 1; c < uint32_t(classes_); ++c)
      if (row[c] > row[best]) best = c;
    out[r] = best;
  }
  return out;
}

double accuracy(const std::vector<uint32_t>& confusion, int64_t classes) {
  uint64_t right = 0, all = 0;
  for (int64_t t = 0; t < classes; ++t)
    for (int64_t p = 0; p < classes; ++p) {
      all += confusion[size_t(t * classes + p)];
      if (t == p) right += confusion[size_t(t * classes + p)];
    }
  return all ? double(right) / double(all) : 0.0;
}

}  // namespace vkgrad::gnn
