// runtime/sparse.h: edges grouped by destination in their given order, the transpose against a
// brute-force listing, validate()'s messages for each kind of bad array, and an edgeless
// graph uploaded and aggregated over (zeros).
#include "vkgrad/runtime/sparse.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/error_text.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/ops/spmm.h"

namespace vkgrad::test {
namespace {

using graph::Csr;

TEST(SparseTest, CsrFromEdgesGroupsByDestinationKeepingTheirOrder) {
  // (source, destination); node 3 has no incoming edge, node 4 none at all.
  const Csr csr = graph::csrFromEdges("g", 5, {{1, 2}, {0, 0}, {3, 2}, {2, 1}, {1, 2}, {0, 0}});
  EXPECT_EQ(csr.nodes, 5);
  EXPECT_EQ(csr.offsets, (std::vector<uint32_t>{0, 2, 3, 6, 6, 6}));
  EXPECT_EQ(csr.sources, (std::vector<uint32_t>{0, 0, 2, 1, 3, 1}));
  EXPECT_EQ(csr.destinations(), (std::vector<uint32_t>{0, 0, 1, 2, 2, 2}));
  EXPECT_NO_THROW(csr.validate("g"));
  EXPECT_EQ(errorText([] {
              graph::csrFromEdges("g", 3, {{0, 1}, {1, 3}});
            }),
            "graph g: edge 1 (1 -> 3) names a node >= 3");
}

// Every source's edge list is exactly the edges with that source, in increasing edge id.
TEST(SparseTest, TransposeListsEachSourcesEdgesInOrder) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (int k = 0; k < 300; ++k) edges.push_back({rng.below(23), rng.below(23)});
  edges.push_back({22, 22});
  const Csr csr = graph::csrFromEdges("g", 29, edges);  // nodes 23..28 isolated
  std::vector<uint32_t> t_offsets, t_edges;
  csr.transpose(t_offsets, t_edges);
  ASSERT_EQ(t_offsets.size(), 30u);
  ASSERT_EQ(t_edges.size(), csr.sources.size());
  EXPECT_EQ(t_offsets[0], 0u);
  for (uint32_t i = 0; i < 29; ++i) {
    std::vector<uint32_t> want;
    for (uint32_t e = 0; e < csr.sources.size(); ++e)
      if (csr.sources[e] == i) want.push_back(e);
    const std::vector<uint32_t> got(t_edges.begin() + t_offsets[i],
                                    t_edges.begin() + t_offsets[i + 1]);
    EXPECT_EQ(got, want) << "source " << i;
  }
}

TEST(SparseTest, ValidateNamesTheFirstBadEntry) {
  Csr csr;
  csr.nodes = 3;
  csr.offsets = {0, 2, 1, 3};
  csr.sources = {0, 1, 2};
  EXPECT_EQ(errorText([&] { csr.validate("cora"); }),
            "graph cora: offsets[2] = 1 is less than offsets[1] = 2");
  csr.offsets = {1, 2, 2, 3};
  EXPECT_EQ(errorText([&] { csr.validate("cora"); }), "graph cora: offsets[0] = 1, not 0");
  csr.offsets = {0, 1, 2, 2};
  EXPECT_EQ(errorText([&] { csr.validate("cora"); }),
            "graph cora: offsets[3] = 2 but there are 3 edges");
  csr.offsets = {0, 1, 2};
  EXPECT_EQ(errorText([&] { csr.validate("cora"); }),
            "graph cora: 3 offsets for 3 nodes (need nodes + 1)");
  csr.offsets = {0, 1, 2, 3};
  csr.sources = {0, 3, 2};
  EXPECT_EQ(errorText([&] { csr.validate("cora"); }),
            "graph cora: sources[1] = 3 is not a node (there are 3)");
  csr.sources = {0, 2, 2};
  EXPECT_NO_THROW(csr.validate("cora"));
}

class SparseUploadTest : public VkTest {};

TEST_F(SparseUploadTest, UploadRefusesABadGraph) {
  Csr csr;
  csr.nodes = 2;
  csr.offsets = {0, 1, 1};
  csr.sources = {5};
  EXPECT_EQ(errorText([&] { graph::uploadGraph(ctx(), "bad", csr); }),
            "graph bad: sources[0] = 5 is not a node (there are 2)");
}

// No edges: the edge arrays hold one unused word each, and aggregating gives exactly zeros.
TEST_F(SparseUploadTest, AnEdgelessGraphUploadsAndAggregatesToZeros) {
  const graph::SparseGraph a =
      graph::uploadGraph(ctx(), "empty", graph::csrFromEdges("empty", 4, {}));
  EXPECT_EQ(a.nodes, 4);
  EXPECT_EQ(a.edges, 0);
  EXPECT_EQ(a.offsets.shape, (ops::Shape{5}));
  EXPECT_EQ(a.t_offsets.shape, (ops::Shape{5}));
  for (const graph::Dataset* d : {&a.sources, &a.destinations, &a.t_edges})
    EXPECT_EQ(d->shape, (ops::Shape{1})) << d->name;
  graph::Graph g;
  const graph::Tensor x = g.input("x", {4, 3});
  const graph::Tensor y = graph::spmm(g, a, x);
  g.markOutput(y);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, std::vector<float>(12, 1.5f));
  exec.step();
  EXPECT_EQ(exec.read(y), std::vector<float>(12, 0.0f));
}

}  // namespace
}  // namespace vkgrad::test
