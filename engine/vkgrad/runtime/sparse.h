// Sparse graphs (the GNN's adjacency) on the device: a directed graph of `nodes` nodes stored
// once as CSR over destinations, plus its transpose for the backward passes, so that every
// aggregation, forward and backward, is a gather over one node's edge list: no float atomics,
// the same bits for the same inputs.
//
//   Csr (host): for destination j, its incoming edges are e in [offsets[j], offsets[j+1]),
//   each from node sources[e]; destinations[e] = j. Edge e is "edge e" everywhere (edge
//   weights, attention scores (E, H) are in this order).
//   The transpose groups the same edges by source: for source i, t_edges[k] for k in
//   [t_offsets[i], t_offsets[i+1]) are the ids e of its outgoing edges, in increasing e, and
//   t_destinations[k] = destinations[t_edges[k]] their far ends (stored, so the transposed
//   aggregation reads its neighbours in order instead of through t_edges).
//
// Validated on the host before upload (offsets start at 0, never decrease, end at the edge
// count; every node id is below `nodes`): a bad graph is an Error naming the graph and the
// first bad entry. Self-loops, duplicate edges and isolated nodes are all allowed.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

struct Csr {
  int64_t nodes = 0;
  std::vector<uint32_t> offsets;  // nodes + 1
  std::vector<uint32_t> sources;  // edges

  int64_t edges() const { return int64_t(sources.size()); }
  // Throws Error "graph <name>: offsets[5] = 7 is less than offsets[4] = 9" and the like.
  void validate(const std::string& name) const;
  // The destination of every edge, in edge order.
  std::vector<uint32_t> destinations() const;
  // The transpose's arrays (see above): t_offsets (nodes + 1), t_edges (edges).
  void transpose(std::vector<uint32_t>& t_offsets, std::vector<uint32_t>& t_edges) const;
};

// From (source, destination) pairs in any order: edges are grouped by destination, keeping
// their given order within a destination. Throws Error naming the graph and the pair when a
// node id is >= nodes, or when there are 2^32 or more edges or nodes.
Csr csrFromEdges(const std::string& name, int64_t nodes,
                 const std::vector<std::pair<uint32_t, uint32_t>>& edges);

// A Csr on the device: u32 datasets read by the sparse ops (graph::spmm, edgeSoftmax), never
// copied. It must outlive every compiled graph that reads it.
struct SparseGraph {
  std::string name;
  int64_t nodes = 0, edges = 0;
  Dataset offsets;         // (nodes + 1)
  Dataset sources;         // (edges)
  Dataset destinations;    // (edges)
  Dataset t_offsets;       // (nodes + 1)
  Dataset t_edges;         // (edges)
  Dataset t_destinations;  // (edges)
};

// Validates csr (Error naming the graph and the bad entry) and uploads its arrays and its
// transpose. A graph with no edges is allowed (every aggregation is then 0).
SparseGraph uploadGraph(vk::Context& context, const std::string& name, const Csr& csr);

}  // namespace vkgrad::graph
