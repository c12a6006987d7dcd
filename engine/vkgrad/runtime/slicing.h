// Where a recorded step splits into pieces for frame loops (Executor::slice, sliceByCost,
// sliceByTime): the positions in the plan's order at which pieces start, the first 0. Pure
// functions of the plan and the costs given, so the splitting is tested with fixed costs,
// never with measured ones.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace vkgrad::graph {

class Graph;

// Pieces of at most `nodes` launched nodes each (0: one piece); `order`: the nodes that run,
// in plan order. A node without a launch (a view) joins the piece before it.
std::vector<size_t> piecesByCount(const Graph& graph, std::span<const int> order, int nodes);
// Pieces of at most `budget` each, by node_cost[node] (any unit, such as ms); a negative cost
// means none given (a view, an untimed node): the node joins the piece before it. A node
// costing more than the budget is a piece alone.
std::vector<size_t> piecesByCost(std::span<const int> order, std::span<const double> node_cost,
                                 double budget);

}  // namespace vkgrad::graph
