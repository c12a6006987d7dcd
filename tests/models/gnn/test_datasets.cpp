// models/gnn's data: the embedded karate club (the graph networkx 2.8.8 ships, checked once
// when the file was written), the stochastic block model's sizes and densities, the cycle set's
// labels against an independent union-find check, and the edge-list reader's errors.
#include "vkgrad/gnn/datasets.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/random.h"
#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

TEST(GnnDatasetsTest, KarateClubIsZacharysGraph) {
  const gnn::NodeData d = gnn::karateClub();
  EXPECT_EQ(d.nodes, 34);
  EXPECT_EQ(d.edges.size(), 156u);  // 78 friendships, both directions
  std::set<std::pair<uint32_t, uint32_t>> edges(d.edges.begin(), d.edges.end());
  EXPECT_EQ(edges.size(), 156u);
  for (const auto& [a, b] : d.edges) {
    EXPECT_NE(a, b);
    EXPECT_TRUE(edges.count({b, a})) << a << " " << b;
  }
  EXPECT_EQ(std::count(d.labels.begin(), d.labels.end(), 0u), 17);  // Mr. Hi's faction
  EXPECT_EQ(d.labels[0], 0u);
  EXPECT_EQ(d.labels[33], 1u);
  EXPECT_EQ(d.labels[8], 0u);  // member 9 of Zachary's paper: Mr. Hi's, though tied to both
  EXPECT_TRUE(edges.count({0, 8}) && edges.count({8, 33}));
  EXPECT_EQ(d.classes, 2);
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"Mr. Hi", "Officer"}));
  EXPECT_EQ(d.feature_dim, 34);  // one-hot identity
}

TEST(GnnDatasetsTest, BlockModelHasItsDensitiesAndIsSeeded) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 3000, k = 3;
  const double p_in = 0.01, p_out = 0.002;
  const gnn::NodeData d = gnn::stochasticBlockModel(n, k, p_in, p_out, 4, 1.0, rng.seed());
  EXPECT_EQ(d.nodes, n);
  EXPECT_EQ(std::count(d.labels.begin(), d.labels.end(), 1u), n / k);
  double inside = 0, across = 0;
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const auto& [a, b] : d.edges) {
    ASSERT_NE(a, b);
    ASSERT_TRUE(seen.insert({a, b}).second) << "duplicate edge " << a << " " << b;
    (d.labels[a] == d.labels[b] ? inside : across) += 0.5;  // each pair is listed twice
  }
  const double pairs_in = k * (n / k) * (n / k - 1) / 2.0,
               pairs_out = n * n / 2.0 - n * n / 2.0 / k;
  // Binomial counts: 5 sigma.
  EXPECT_NEAR(inside, p_in * pairs_in, 5 * std::sqrt(p_in * pairs_in));
  EXPECT_NEAR(across, p_out * pairs_out, 5 * std::sqrt(p_out * pairs_out));
  const gnn::NodeData again = gnn::stochasticBlockModel(n, k, p_in, p_out, 4, 1.0, rng.seed());
  EXPECT_EQ(again.edges, d.edges);
  EXPECT_EQ(again.features, d.features);
  EXPECT_NE(gnn::stochasticBlockModel(n, k, p_in, p_out, 4, 1.0, rng.seed() + 1).edges, d.edges);
}

// The benchmark's size: 100,000 nodes and about 2,000,000 directed edges, in O(nodes + edges).
TEST(GnnDatasetsTest, BlockModelReachesBenchmarkSize) {
  const auto start = std::chrono::steady_clock::now();
  const gnn::NodeData d =
      gnn::stochasticBlockModel(100000, 10, 16.0 / 9999, 4.0 / 90000, 8, 1.0, 1);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("sbm 100000 nodes, %zu edges in %.2f s\n", d.edges.size(), s);
  EXPECT_NEAR(double(d.edges.size()), 2.0e6, 2.0e4);
}

// Union-find over the undirected edges: a graph has a cycle iff some edge joins two nodes
// already connected.
bool hasCycle(const gnn::NodeData& g) {
  std::vector<uint32_t> parent(size_t(g.nodes));
  std::iota(parent.begin(), parent.end(), 0u);
  std::function<uint32_t(uint32_t)> root = [&](uint32_t x) {
    return parent[x] == x ? x : parent[x] = root(parent[x]);
  };
  for (const auto& [a, b] : g.edges) {
    if (a > b) continue;  // each undirected edge once
    const uint32_t ra = root(a), rb = root(b);
    if (ra == rb) return true;
    parent[ra] = rb;
  }
  return false;
}

TEST(GnnDatasetsTest, CycleGraphsAreLabelledByWhetherTheyHaveACycle) {
  Rng rng;
  const gnn::GraphSet set = gnn::cycleGraphs(200, rng.seed());
  ASSERT_EQ(set.graphs.size(), 200u);
  EXPECT_EQ(std::count(set.labels.begin(), set.labels.end(), 1u), 100);
  for (size_t i = 0; i < set.graphs.size(); ++i) {
    const gnn::NodeData& g = set.graphs[i];
    ASSERT_GE(g.nodes, 8);
    ASSERT_LE(g.nodes, 20);
    EXPECT_EQ(hasCycle(g), set.labels[i] == 1) << "graph " << i;
    EXPECT_EQ(g.features.size(), size_t(2 * g.nodes));
  }
}

class EdgeListTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = fs::temp_directory_path() / ("vkgrad-edges-" + std::to_string(Rng().seed()) + ".txt");
  }
  void TearDown() override { fs::remove(path_); }
  void write(const std::string& text) { std::ofstream(path_) << text; }
  void expectError(const std::string& text, const std::string& where, const std::string& what) {
    write(text);
    try {
      gnn::readEdgeList(path_.string());
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find(path_.string() + ":" + where), std::string::npos) << m;
      EXPECT_NE(m.find(what), std::string::npos) << m;
    }
  }
  fs::path path_;
};

TEST_F(EdgeListTest, ReadsEdgesLabelsAndFeatures) {
  write(
      "# a triangle and a tail\n0 1\n1 2\n2 0\n\n2 3  # the tail\n"
      "node 0 label 0\nnode 1 label 0\nnode 2 label 1\nnode 3 label 1\n"
      "node 0 features 1 0.5\nnode 1 features 2 0\nnode 2 features 3 1\nnode 3 features -1 2\n");
  const gnn::NodeData d = gnn::readEdgeList(path_.string());
  EXPECT_EQ(d.nodes, 4);
  EXPECT_EQ(d.edges.size(), 8u);
  EXPECT_EQ(d.classes, 2);
  EXPECT_EQ(d.labels, (std::vector<uint32_t>{0, 0, 1, 1}));
  EXPECT_EQ(d.feature_dim, 2);
  EXPECT_EQ(d.features[6], -1.0f);
  EXPECT_EQ(gnn::readEdgeList(path_.string(), true).edges.size(), 4u);
}

TEST_F(EdgeListTest, BadLinesNameTheFileAndLine) {
  expectError("0 1\n1 x\n", "2:", "node id 'x' is not an integer");
  expectError("0 1\n1 2 3\n", "2:", "expected an edge");
  expectError("0 1\nnode 0 colour 3\n", "2:", "expected \"label\" or \"features\"");
  expectError("0 1\nnode 0 label 1\nnode 0 label 0\n", "3:", "has a label already");
  expectError("0 1\nnode 0 features 1 2\nnode 1 features 1\n",
              "3:", "1 features, earlier nodes have 2");
  expectError("0 -4\n", "1:", "not an integer in [0, 2^24)");
  // Found by fuzzing: one stray large id made 1.3 billion nodes (10 GB of features).
  expectError("0 1313313133\n", "1:", "not an integer in [0, 2^24)");
  expectError("0 1\nnode 1 features nan\n", "2:", "not a finite number");
  write("0 1\n1 2\nnode 0 label 0\n");
  EXPECT_THROW(gnn::readEdgeList(path_.string()), Error);  // labels for some nodes only
  fs::remove(path_);
  EXPECT_THROW(gnn::readEdgeList(path_.string()), Error);
}

}  // namespace
}  // namespace vkgrad::test
