#include "vkgrad/runtime/sparse.h"

#include <algorithm>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"

namespace vkgrad::graph {

void Csr::validate(const std::string& name) const {
  const std::string at = "graph " + name + ": ";
  if (nodes < 0 || nodes >= int64_t(UINT32_MAX))
    throw Error(at + std::to_string(nodes) + " nodes: must be in [0, 2^32 - 1)");
  if (int64_t(offsets.size()) != nodes + 1)
    throw Error(at + std::to_string(offsets.size()) + " offsets for " + std::to_string(nodes) +
                " nodes (need nodes + 1)");
  if (sources.size() >= size_t(UINT32_MAX)) throw Error(at + "2^32 or more edges");
  if (offsets[0] != 0) throw Error(at + "offsets[0] = " + std::to_string(offsets[0]) + ", not 0");
  for (int64_t j = 1; j <= nodes; ++j)
    if (offsets[size_t(j)] < offsets[size_t(j - 1)])
      throw Error(at + "offsets[" + std::to_string(j) +
                  "] = " + std::to_string(offsets[size_t(j)]) + " is less than offsets[" +
                  std::to_string(j - 1) + "] = " + std::to_string(offsets[size_t(j - 1)]));
  if (offsets[size_t(nodes)] != sources.size())
    throw Error(at + "offsets[" + std::to_string(nodes) +
                "] = " + std::to_string(offsets[size_t(nodes)]) + " but there are " +
                std::to_string(sources.size()) + " edges");
  for (size_t e = 0; e < sources.size(); ++e)
    if (sources[e] >= nodes)
      throw Error(at + "sources[" + std::to_string(e) + "] = " + std::to_string(sources[e]) +
                  " is not a node (there are " + std::to_string(nodes) + ")");
}

std::vector<uint32_t> Csr::destinations() const {
  std::vector<uint32_t> d(sources.size());
  for (int64_t j = 0; j < nodes; ++j)
    for (uint32_t e = offsets[size_t(j)]; e < offsets[size_t(j + 1)]; ++e) d[e] = uint32_t(j);
  return d;
}

void Csr::transpose(std::vector<uint32_t>& t_offsets, std::vector<uint32_t>& t_edges) const {
  t_offsets.assign(size_t(nodes + 1), 0);
  for (const uint32_t s : sources) ++t_offsets[size_t(s) + 1];
  for (int64_t i = 0; i < nodes; ++i) t_offsets[size_t(i + 1)] += t_offsets[size_t(i)];
  t_edges.assign(sources.size(), 0);
  std::vector<uint32_t> next(t_offsets.begin(), t_offsets.end() - 1);
  for (size_t e = 0; e < sources.size(); ++e) t_edges[next[sources[e]]++] = uint32_t(e);
}

Csr csrFromEdges(const std::string& name, int64_t nodes,
                 const std::vector<std::pair<uint32_t, uint32_t>>& edges) {
  if (nodes < 0 || nodes >= int64_t(UINT32_MAX))
    throw Error("graph " + name + ": " + std::to_string(nodes) +
                " nodes: must be in [0, 2^32 - 1)");
  if (edges.size() >= size_t(UINT32_MAX)) throw Error("graph " + name + ": 2^32 or more edges");
  Csr csr;
  csr.nodes = nodes;
  csr.offsets.assign(size_t(nodes + 1), 0);
  for (size_t k = 0; k < edges.size(); ++k) {
    const auto [s, d] = edges[k];
    if (s >= nodes || d >= nodes)
      throw Error("graph " + name + ": edge " + std::to_string(k) + " (" + std::to_string(s) +
                  " -> " + std::to_string(d) + ") names a node >= " + std::to_string(nodes));
    ++csr.offsets[size_t(d) + 1];
  }
  for (int64_t j = 0; j < nodes; ++j) csr.offsets[size_t(j + 1)] += csr.offsets[size_t(j)];
  csr.sources.assign(edges.size(), 0);
  std::vector<uint32_t> next(csr.offsets.begin(), csr.offsets.end() - 1);
  for (const auto& [s, d] : edges) csr.sources[next[d]++] = s;
  return csr;
}

SparseGraph uploadGraph(vk::Context& context, const std::string& name, const Csr& csr) {
  csr.validate(name);
  SparseGraph g;
  g.name = name;
  g.nodes = csr.nodes;
  g.edges = csr.edges();
  std::vector<uint32_t> t_offsets, t_edges;
  csr.transpose(t_offsets, t_edges);
  // A dataset cannot be empty: an edgeless graph stores one unused word per edge array.
  auto edgeArray = [&](const std::string& what, std::vector<uint32_t> values) {
    const int64_t n = int64_t(values.size());
    if (values.empty()) values.push_back(0);
    Dataset d = uploadDataset(context, name + "." + what, {int64_t(values.size())}, values);
    d.shape = {std::max<int64_t>(n, 1)};
    return d;
  };
  const std::vector<uint32_t> destinations = csr.destinations();
  g.offsets = uploadDataset(context, name + ".offsets", {csr.nodes + 1}, csr.offsets);
  g.sources = edgeArray("sources", csr.sources);
  g.destinations = edgeArray("destinations", destinations);
  g.t_offsets = uploadDataset(context, name + ".t_offsets", {csr.nodes + 1}, t_offsets);
  std::vector<uint32_t> t_destinations(t_edges.size());
  for (size_t k = 0; k < t_edges.size(); ++k) t_destinations[k] = destinations[t_edges[k]];
  g.t_edges = edgeArray("t_edges", t_edges);
  g.t_destinations = edgeArray("t_destinations", std::move(t_destinations));
  return g;
}

}  // namespace vkgrad::graph
