// The data of the GNN family: Zachary's karate club (embedded in the library from
// models/vkgrad/gnn/data/karate.txt), a stochastic block model at any size, a graph-classification
// set (graphs with or without a cycle) and a user's edge list.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vkgrad::gnn {

// One graph with node features and labels (node classification), or one small graph of a
// graph-classification set (labels empty).
struct NodeData {
  std::string name;
  int64_t nodes = 0;
  std::vector<std::pair<uint32_t, uint32_t>> edges;  // (source, destination); an undirected
                                                     // graph lists both directions
  int64_t feature_dim = 0;
  std::vector<float> features;  // nodes * feature_dim, row-major
  int64_t classes = 0;
  std::vector<uint32_t> labels;  // one per node, or empty
  std::vector<std::string> class_names;
};

// 34 members, 78 friendships (156 directed edges), labels the two factions after the split
// (0: Mr. Hi's, 1: the officer's); features: one-hot node identity.
NodeData karateClub();

// `nodes` nodes in `communities` communities of (nearly) equal size, labelled by community;
// each unordered pair joined with probability p_in inside a community and p_out across
// (both directions), drawn in O(nodes + edges) time by geometric skips; features:
// feature_dim values, the community's N(0, 1) centre plus N(0, noise^2) per node. Seeded.
NodeData stochasticBlockModel(int64_t nodes, int64_t communities, double p_in, double p_out,
                              int64_t feature_dim, double noise, uint64_t seed);

// `count` random graphs of 8 to 20 nodes, half of them trees (label 0) and half trees with
// one to three extra edges, so with a cycle (label 1), shuffled. Features per node: 1 and
// its degree / 4, which do not give the label away on any one node. Seeded.
struct GraphSet {
  std::vector<NodeData> graphs;
  std::vector<uint32_t> labels;
  int64_t classes = 2;
  std::vector<std::string> class_names{"tree", "has a cycle"};
};
GraphSet cycleGraphs(int64_t count, uint64_t seed);

// A graph from text: lines "a b" (an edge; both directions unless directed), "node <id> label
// <k>" and "node <id> features <f1> <f2> ...", '#' comments, blank lines. Node ids are
// integers in [0, 2^24); nodes = the largest id + 1; classes = the largest label + 1 (labels
// are given for every node or none). Without feature lines a node's features are its one-hot
// identity up to 4096 nodes, else (1, degree / 4). Any other line or a bad number is an
// Error "<name>:<line>: <what is wrong>".
NodeData parseEdgeList(const std::string& text, const std::string& name, bool directed = false);
// The same from a file (Error naming it when it cannot be read).
NodeData readEdgeList(const std::string& path, bool directed = false);

}  // namespace vkgrad::gnn
