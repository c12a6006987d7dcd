#include "vkgrad/gnn/datasets.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <span>
#include <sstream>

#include "vkgrad/core/error.h"
#include "vkgrad/gnn/karate_data.h"
#include "vkgrad/io/input_file.h"

namespace vkgrad::gnn {
namespace {

constexpr int64_t kMaxId = int64_t(1) << 31;
// An edge list names its nodes by id, and a node's id sets the node count: one stray large id
// (a typo, a hash) would give millions of isolated nodes, each with features. 2^24 nodes is
// far above what the files this reads hold, and a few hundred MiB at most.
constexpr int64_t kMaxListNodes = int64_t(1) << 24;

// Features from the structure alone: one-hot identity for small graphs, else (1, degree/4).
void structuralFeatures(NodeData& d) {
  if (d.nodes <= 4096) {
    d.feature_dim = d.nodes;
    d.features.assign(size_t(d.nodes * d.nodes), 0.0f);
    for (int64_t i = 0; i < d.nodes; ++i) d.features[size_t(i * d.nodes + i)] = 1.0f;
    return;
  }
  d.feature_dim = 2;
  d.features.assign(size_t(d.nodes * 2), 0.0f);
  for (int64_t i = 0; i < d.nodes; ++i) d.features[size_t(2 * i)] = 1.0f;
  for (const auto& e : d.edges) d.features[size_t(2 * e.second + 1)] += 0.25f;
}

// Appends the undirected edges of pairs (i, j), each drawn with probability p: i in
// [a0, a1), j in [b0, b1) for two communities, or i < j both in [a0, a1) for one (then every
// ordered pair is visited and those with i >= j skipped). Geometric skips between drawn pairs:
// O(pairs * p) random numbers, never a loop over all pairs.
void samplePairs(std::vector<std::pair<uint32_t, uint32_t>>& edges, int64_t a0, int64_t a1,
                 int64_t b0, int64_t b1, bool same, double p, std::mt19937_64& rng) {
  if (p <= 0) return;
  const int64_t cols = b1 - b0, pairs = (a1 - a0) * cols;
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double log_q = std::log1p(-std::min(p, 1.0 - 1e-12));
  for (int64_t k = -1;;) {
    k += p >= 1.0 ? 1 : 1 + int64_t(std::floor(std::log1p(-unit(rng)) / log_q));
    if (k >= pairs) return;
    const int64_t i = a0 + k / cols, j = b0 + k % cols;
    if (same && i >= j) continue;
    edges.emplace_back(uint32_t(i), uint32_t(j));
    edges.emplace_back(uint32_t(j), uint32_t(i));
  }
}

[[noreturn]] void lineError(const std::string& name, int line, const std::string& what) {
  throw Error(name + ":" + std::to_string(line) + ": " + what);
}

// An integer in [0, 2^bits).
int64_t parseId(const std::string& word, const std::string& name, int line, const char* what,
                int bits) {
  size_t used = 0;
  long long v = -1;
  try {
    v = std::stoll(word, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (word.empty() || used != word.size() || v < 0 || v >= (int64_t(1) << bits))
    lineError(name, line,
              std::string(what) + " '" + word + "' is not an integer in [0, 2^" +
                  std::to_string(bits) + ")");
  return v;
}
int64_t parseNode(const std::string& word, const std::string& name, int line) {
  static_assert(kMaxListNodes == int64_t(1) << 24);
  return parseId(word, name, line, "node id", 24);
}

// A "node <id> features ..." line's values: each a finite number.
std::vector<float> parseFeatures(std::span<const std::string> words, const std::string& name,
                                 int line) {
  std::vector<float> f;
  for (const std::string& word : words) {
    size_t used = 0;
    float v = 0;
    try {
      v = std::stof(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size() || !std::isfinite(v))
      lineError(name, line, "feature '" + word + "' is not a finite number");
    f.push_back(v);
  }
  return f;
}

}  // namespace

NodeData parseEdgeList(const std::string& text, const std::string& name, bool directed) {
  NodeData d;
  d.name = name;
  std::map<int64_t, uint32_t> labels;
  std::map<int64_t, std::vector<float>> features;
  int64_t max_id = -1;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  while (std::getline(in, raw)) {
    ++line;
    const std::string content = raw.substr(0, raw.find('#'));
    std::istringstream words(content);
    std::vector<std::string> w;
    for (std::string word; words >> word;) w.push_back(word);
    if (w.empty()) continue;
    if (w[0] == "node") {
      if (w.size() < 3)
        lineError(name, line, "expected \"node <id> label <k>\" or \"node <id> features ...\"");
      const int64_t id = parseNode(w[1], name, line);
      max_id = std::max(max_id, id);
      if (w[2] == "label") {
        if (w.size() != 4) lineError(name, line, "expected \"node <id> label <k>\"");
        if (labels.count(id)) lineError(name, line, "node " + w[1] + " has a label already");
        const int64_t k = parseId(w[3], name, line, "label", 16);
        labels[id] = uint32_t(k);
      } else if (w[2] == "features") {
        if (w.size() < 4) lineError(name, line, "node " + w[1] + " has no feature values");
        if (features.count(id)) lineError(name, line, "node " + w[1] + " has features already");
        std::vector<float> f = parseFeatures(std::span(w).subspan(3), name, line);
        if (!features.empty() && features.begin()->second.size() != f.size())
          lineError(name, line,
                    std::to_string(f.size()) + " features, earlier nodes have " +
                        std::to_string(features.begin()->second.size()));
        features[id] = std::move(f);
      } else {
        lineError(name, line, "expected \"label\" or \"features\" after \"node " + w[1] + "\"");
      }
      continue;
    }
    if (w.size() != 2) lineError(name, line, "expected an edge \"a b\", got '" + content + "'");
    const int64_t a = parseNode(w[0], name, line);
    const int64_t b = parseNode(w[1], name, line);
    max_id = std::max({max_id, a, b});
    d.edges.emplace_back(uint32_t(a), uint32_t(b));
    if (!directed && a != b) d.edges.emplace_back(uint32_t(b), uint32_t(a));
  }
  if (max_id < 0) throw Error(name + ": no edges or nodes");
  d.nodes = max_id + 1;
  if (!labels.empty()) {
    if (int64_t(labels.size()) != d.nodes)
      throw Error(name + ": " + std::to_string(labels.size()) + " of " + std::to_string(d.nodes) +
                  " nodes have labels: give every node one, or none");
    d.labels.resize(size_t(d.nodes));
    uint32_t top = 0;
    for (const auto& [id, k] : labels) {
      d.labels[size_t(id)] = k;
      top = std::max(top, k);
    }
    d.classes = int64_t(top) + 1;
    for (int64_t c = 0; c < d.classes; ++c) d.class_names.push_back("class " + std::to_string(c));
  }
  if (features.empty()) {
    structuralFeatures(d);
  } else {
    if (int64_t(features.size()) != d.nodes)
      throw Error(name + ": " + std::to_string(features.size()) + " of " + std::to_string(d.nodes) +
                  " nodes have features: give every node some, or none");
    d.feature_dim = int64_t(features.begin()->second.size());
    for (const auto& [id, f] : features) d.features.insert(d.features.end(), f.begin(), f.end());
  }
  return d;
}

NodeData readEdgeList(const std::string& path, bool directed) {
  // 256 MiB: some 16 million edges, far more than one device trains on in full-graph steps.
  return parseEdgeList(graph::readInputFile(path, "an edge list", uint64_t(256) << 20), path,
                       directed);
}

NodeData karateClub() {
  NodeData d = parseEdgeList(kKarateText, "karate");
  d.class_names = {"Mr. Hi", "Officer"};
  return d;
}

NodeData stochasticBlockModel(int64_t nodes, int64_t communities, double p_in, double p_out,
                              int64_t feature_dim, double noise, uint64_t seed) {
  if (communities < 1 || nodes < communities || nodes >= kMaxId)
    throw Error("stochasticBlockModel: " + std::to_string(nodes) + " nodes in " +
                std::to_string(communities) + " communities");
  if (!(p_in >= 0 && p_in <= 1 && p_out >= 0 && p_out <= 1))
    throw Error("stochasticBlockModel: probabilities must be in [0, 1]");
  if (feature_dim < 1 || !(noise >= 0)) throw Error("stochasticBlockModel: bad features");
  NodeData d;
  d.name = "sbm";
  d.nodes = nodes;
  d.classes = communities;
  d.feature_dim = feature_dim;
  std::mt19937_64 rng(seed);
  std::vector<int64_t> start(size_t(communities + 1));
  for (int64_t c = 0; c <= communities; ++c) start[size_t(c)] = c * nodes / communities;
  d.labels.resize(size_t(nodes));
  for (int64_t c = 0; c < communities; ++c) {
    d.class_names.push_back("community " + std::to_string(c));
    for (int64_t i = start[size_t(c)]; i < start[size_t(c + 1)]; ++i)
      d.labels[size_t(i)] = uint32_t(c);
  }
  for (int64_t a = 0; a < communities; ++a)
    for (int64_t b = a; b < communities; ++b)
      samplePairs(d.edges, start[size_t(a)], start[size_t(a + 1)], start[size_t(b)],
                  start[size_t(b + 1)], a == b, a == b ? p_in : p_out, rng);
  std::normal_distribution<float> normal;
  std::vector<float> centres(size_t(communities * feature_dim));
  for (float& v : centres) v = normal(rng);
  d.features.resize(size_t(nodes * feature_dim));
  for (int64_t i = 0; i < nodes; ++i)
    for (int64_t f = 0; f < feature_dim; ++f)
      d.features[size_t(i * feature_dim + f)] =
          centres[size_t(d.labels[size_t(i)] * feature_dim + f)] + float(noise) * normal(rng);
  return d;
}

GraphSet cycleGraphs(int64_t count, uint64_t seed) {
  if (count < 2 || count > 10000000) throw Error("cycleGraphs: count must be in [2, 10^7]");
  GraphSet set;
  std::mt19937_64 rng(seed);
  for (int64_t k = 0; k < count; ++k) {
    const bool cyclic = k % 2 == 1;
    NodeData g;
    g.name = "graph " + std::to_string(k);
    g.nodes = std::uniform_int_distribution<int64_t>(8, 20)(rng);
    std::vector<std::vector<bool>> adjacent(size_t(g.nodes), std::vector<bool>(size_t(g.nodes)));
    auto connect = [&](int64_t a, int64_t b) {
      adjacent[size_t(a)][size_t(b)] = adjacent[size_t(b)][size_t(a)] = true;
      g.edges.emplace_back(uint32_t(a), uint32_t(b));
      g.edges.emplace_back(uint32_t(b), uint32_t(a));
    };
    for (int64_t i = 1; i < g.nodes; ++i)  // a random tree: each node joins an earlier one
      connect(i, std::uniform_int_distribution<int64_t>(0, i - 1)(rng));
    if (cyclic) {  // one to three extra edges between non-adjacent nodes close a cycle each
      const int extra = std::uniform_int_distribution<int>(1, 3)(rng);
      for (int added = 0; added < extra;) {
        const int64_t a = std::uniform_int_distribution<int64_t>(0, g.nodes - 1)(rng);
        const int64_t b = std::uniform_int_distribution<int64_t>(0, g.nodes - 1)(rng);
        if (a == b || adjacent[size_t(a)][size_t(b)]) continue;
        connect(a, b);
        ++added;
      }
    }
    g.feature_dim = 2;
    g.features.assign(size_t(2 * g.nodes), 0.0f);
    for (int64_t i = 0; i < g.nodes; ++i) g.features[size_t(2 * i)] = 1.0f;
    for (const auto& e : g.edges) g.features[size_t(2 * e.second + 1)] += 0.25f;
    set.graphs.push_back(std::move(g));
    set.labels.push_back(cyclic ? 1u : 0u);
  }
  std::vector<size_t> order(set.graphs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::shuffle(order.begin(), order.end(), rng);
  GraphSet shuffled;
  for (const size_t i : order) {
    shuffled.graphs.push_back(std::move(set.graphs[i]));
    shuffled.labels.push_back(set.labels[i]);
  }
  return shuffled;
}

}  // namespace vkgrad::gnn
