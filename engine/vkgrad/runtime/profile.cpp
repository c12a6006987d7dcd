#include "vkgrad/runtime/profile.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>

namespace vkgrad::graph {

std::vector<OpTime> timeByOp(const Graph& graph, std::span<const NodeTime> profile) {
  std::map<OpKind, OpTime> by_op;
  for (const NodeTime& n : profile) {
    const Node& node = graph.nodes().at(size_t(n.node));
    if (node.isView()) continue;
    OpTime& t = by_op[node.op];
    t.op = node.op;
    t.nodes += 1;
    t.ms += n.ms;
  }
  std::vector<OpTime> out;
  for (const auto& [op, t] : by_op) out.push_back(t);
  std::stable_sort(out.begin(), out.end(),
                   [](const OpTime& a, const OpTime& b) { return a.ms > b.ms; });
  return out;
}

std::string formatProfile(const Graph& graph, std::span<const NodeTime> profile) {
  const std::vector<OpTime> times = timeByOp(graph, profile);
  double total = 0.0;
  for (const OpTime& t : times) total += t.ms;
  int width = 22;  // the op column fits the longest name
  for (const OpTime& t : times) width = std::max(width, int(std::strlen(opName(t.op))));
  std::string out;
  char line[160];
  std::snprintf(line, sizeof line, "%-*s %6s %10s %7s\n", width, "op", "nodes", "ms", "share");
  out += line;
  for (const OpTime& t : times) {
    std::snprintf(line, sizeof line, "%-*s %6d %10.3f %6.1f%%\n", width, opName(t.op), t.nodes, t.ms,
                  total > 0 ? 100.0 * t.ms / total : 0.0);
    out += line;
  }
  int nodes = 0;
  for (const OpTime& t : times) nodes += t.nodes;
  std::snprintf(line, sizeof line, "%-*s %6d %10.3f\n", width, "total", nodes, total);
  out += line;
  return out;
}

}  // namespace vkgrad::graph
