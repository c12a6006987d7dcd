#include "vkgrad/runtime/slicing.h"

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

std::vector<size_t> piecesByCount(const Graph& graph, std::span<const int> order, int nodes) {
  std::vector<size_t> starts{0};
  int launched = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!graph.nodes()[size_t(order[i])].def().launch) continue;
    if (nodes > 0 && launched == nodes) {
      starts.push_back(i);
      launched = 0;
    }
    ++launched;
  }
  return starts;
}

std::vector<size_t> piecesByCost(std::span<const int> order, std::span<const double> node_cost,
                                 double budget) {
  std::vector<size_t> starts{0};
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const double cost = node_cost[size_t(order[i])];
    if (cost < 0) continue;
    if (sum > 0 && sum + cost > budget) {
      starts.push_back(i);
      sum = 0;
    }
    sum += cost;
  }
  return starts;
}

}  // namespace vkgrad::graph
