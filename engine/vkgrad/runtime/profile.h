// Where a step's GPU time goes: an Executor::profile() summed by op kind.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

struct OpTime {
  OpKind op = OpKind::Matmul;
  int nodes = 0;  // how many nodes of this kind ran
  double ms = 0.0;
};

// The profile's time per op kind, most expensive first. Views (Reshape, Slice) launch
// nothing and are left out.
std::vector<OpTime> timeByOp(const Graph& graph, std::span<const NodeTime> profile);

// A table of timeByOp(): op, nodes, ms, share of the profile's total; one line per kind.
std::string formatProfile(const Graph& graph, std::span<const NodeTime> profile);

}  // namespace vkgrad::graph
