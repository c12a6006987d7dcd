// What vkgrad-gnn trains on: one graph whose labelled nodes train and whose others are
// evaluated (a node task: karate, sbm or an edge-list file), or graphs, 80 % training and
// 20 % held out, each batch of them one block-diagonal graph (a graph task: cycles).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/cli.h"
#include "vkgrad/gnn/datasets.h"
#include "vkgrad/gnn/gnn.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

struct Task {
  std::string name;  // --data
  bool graph_level = false;
  gnn::NodeData nodes;                // a node task's graph
  gnn::GraphSet graphs;               // a graph task's graphs
  std::vector<uint32_t> train, test;  // a node task's rows: labelled nodes and the others
  // On the device (uploadTask): [0] trains; [1] evaluates a graph task, [0] a node task.
  std::vector<gnn::GraphData> data;
  std::vector<graph::Dataset> labels;  // per data
  graph::Dataset train_ids, test_ids;  // rows of data[0] and data.back()
};

// --data and what makes the data (sbm's and cycles' sizes, --labelled, --directed).
void declareTaskOptions(Cli& cli);
// The task's host data, made or read; UsageError or Error naming what is wrong.
Task readTask(const Cli& cli, uint64_t seed);
// Sets what the data decides in config (in, classes, graph_level).
void configureFor(const Task& task, gnn::GnnConfig& config);
// The data's fingerprint (--resume refuses other data).
std::string fingerprintOf(const Task& task);
const std::vector<std::string>& classNames(const Task& task);
// Uploads the graphs (with the self-loops and weights `model` reads), labels and rows.
void uploadTask(vk::Context& context, gnn::Model model, Task& task);

}  // namespace vkgrad::apps
