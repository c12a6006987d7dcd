// Graph neural networks on the graph engine, as the lecture notes and the common libraries
// define them, for node classification (logits per node) and graph classification (sum
// pooling over each graph's nodes, then a linear head):
//   conv (the notes' layer):  h_j = theta1^T x_j + sum over i in N(j) of theta2^T x_i + b
//   gcn:                      H = D^-1/2 (A + I) D^-1/2 X W + b   (weights per edge, fixed)
//   gat:                      per head, z = X W; e_ij = LeakyReLU(a_src . z_i + a_dst . z_j);
//                             alpha = softmax of e over each node's incoming edges (and
//                             itself); h_j = sum alpha_ij z_i; heads concatenated (hidden
//                             layers) or one head (the output layer), + b
// Hidden layers are followed by ReLU (ELU for GAT, as its paper). All aggregation is
// graph::spmm over the CSR of runtime/sparse.h (deterministic), GAT's normalisation
// graph::edgeSoftmax; nothing leaves the device inside a step.
//
// Parameter names: l<i>.w, l<i>.b (and l<i>.w2 for conv's neighbour weights, l<i>.a_src,
// l<i>.a_dst for GAT); graph classification adds head.w, head.b.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/sparse.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::gnn {

enum class Model { Conv, Gcn, Gat };
const char* modelName(Model model);
Model modelFromName(const std::string& name);  // "conv", "gcn", "gat"; Error otherwise

struct GnnConfig {
  Model model = Model::Gcn;
  int64_t in = 0;       // node feature width
  int64_t hidden = 16;  // per head for GAT
  int64_t classes = 2;
  int64_t layers = 2;        // graph layers; for nodes the last one outputs the classes
  int64_t heads = 4;         // GAT's hidden layers (the output layer has one)
  bool graph_level = false;  // sum-pool the last layer's nodes per graph, then a linear head
  float dropout = 0.0f;      // on every graph layer's input, in training graphs only
  void validate() const;     // Error naming the bad field
  int64_t width(int64_t layer) const;  // output width of graph layer `layer`
};

void declareGnn(graph::ParameterStore& store, const GnnConfig& config);

// A graph (or a block-diagonal batch of graphs) as the models read it, on the device.
struct GraphData {
  std::string name;
  int64_t nodes = 0;
  graph::SparseGraph adjacency;  // the edges, plus a self-loop per node for gcn and gat
  graph::Dataset gcn_weights;    // (E) f32: 1 / sqrt(deg_i deg_j), gcn only
  graph::Dataset features;       // (nodes, in) f32
  graph::Dataset segments;       // (graphs + 1) u32 node offsets, graph_level only
  int64_t graphs = 0;
};

// Uploads one graph: edges (source, destination), features (nodes * feature_dim). For a
// batch of graphs give the block-diagonal union and `segments` (graphs + 1 offsets).
GraphData uploadGraphData(vk::Context& context, const std::string& name, Model model, int64_t nodes,
                          const std::vector<std::pair<uint32_t, uint32_t>>& edges,
                          const std::vector<float>& features, int64_t feature_dim,
                          const std::vector<uint32_t>& segments = {});

// (nodes, classes) logits, or (graphs, classes) when config.graph_level.
graph::Tensor gnnLogits(graph::Graph& g, const graph::ParameterStore& store,
                        const GnnConfig& config, const GraphData& data);

// The loss of full-graph training, for graph::Trainer: the trainer's one dataset is the rows
// trained on (u32 ids of labelled nodes, or of training graphs), all of them in every step's
// batch. The forward pass runs over the whole graph and the cross-entropy is taken on those
// rows' logits against `labels` (one per row of the logits). Evaluation counts right and
// wrong rows on the device (Evaluator).
graph::LossFn gnnLossFn(const graph::ParameterStore& store, const GnnConfig& config,
                        const GraphData& data, const graph::Dataset& labels);

class Evaluator {
 public:
  Evaluator(vk::Context& context, const graph::ParameterStore& store, const GnnConfig& config,
            const GraphData& data, const graph::Dataset& labels, const graph::Dataset& ids);
  ~Evaluator();
  // counts[t * classes + p] over the rows `ids`.
  std::vector<uint32_t> confusion();
  // The predicted class of every row of the logits (for pictures).
  std::vector<uint32_t> predictions();

 private:
  int64_t classes_;
  graph::Graph g_;
  graph::Tensor counts_, logits_;
  std::unique_ptr<graph::Executor> exec_;
};

double accuracy(const std::vector<uint32_t>& confusion, int64_t classes);

}  // namespace vkgrad::gnn
