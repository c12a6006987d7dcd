#include "vkgrad/runtime/op.h"

#include <functional>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "common/expect.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/ops/cross_entropy.h"
#include "vkgrad/ops/gather.h"
#include "vkgrad/ops/layer_norm.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;

TEST(OpRegistryTest, EveryKindHasOneNamedDefinition) {
  std::set<std::string> names;
  for (int k = 0; k <= int(OpKind::AdamWUpdate); ++k) {
    const graph::OpDef& def = graph::opDef(OpKind(k));
    ASSERT_NE(def.name, nullptr) << "kind " << k;
    EXPECT_TRUE(names.insert(def.name).second) << def.name << " defined twice";
    EXPECT_STREQ(graph::opName(OpKind(k)), def.name);
    // A view records nothing; anything else that is not a view must launch kernels.
    EXPECT_EQ(def.view, def.launch == nullptr) << def.name;
    EXPECT_LT(def.in_place, def.inputs) << def.name;
  }
  EXPECT_STREQ(graph::opName(OpKind::Matmul), "matmul");
  EXPECT_TRUE(graph::opDef(OpKind::Reshape).view);
  EXPECT_TRUE(graph::opDef(OpKind::AdamWUpdate).side_effects);
  EXPECT_NE(graph::opDef(OpKind::LayerNorm).backward, nullptr);
  EXPECT_EQ(graph::opDef(OpKind::Categorical).backward, nullptr);
}

// Slots are named next to each op; a node whose slot counts are not its op's is refused.
TEST(OpRegistryTest, NodesWithTheWrongSlotCountsAreRefused) {
  Graph g;
  const Tensor a = g.input("a", {2, 3}), b = g.input("b", {3, 4});
  const int c = g.newTensor({"c", {2, 4}});
  const size_t nodes = g.nodes().size();
  EXPECT_THROW(g.addNode({OpKind::Matmul, {a.id, b.id, -1}, {c, -1}}), Error);  // residual missing
  EXPECT_THROW(g.addNode({OpKind::Add, {a.id, b.id}, {c, c}}), Error);
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_NO_THROW(g.addNode({OpKind::Matmul, {a.id, b.id, -1, -1}, {c, -1}}));
}

// The graph builders and the launchers share the ops layer's shape rules: the same bad
// shapes give the same text, whether a graph is built or a kernel recorded.
TEST(OpRegistryTest, BuildersThrowTheOpsLayersShapeErrors) {
  using ops::DType;
  using ops::Shape;
  Graph g;
  const Tensor a = g.input("a", {4, 8}), b = g.input("b", {9, 2});
  EXPECT_EQ(shapeErrorText([&] { g.matmul(a, b); }), shapeErrorText([&] {
              ops::matmulShape({4, 8}, {9, 2});
            }));
  EXPECT_EQ(shapeErrorText([&] { g.matmul(a, b, {}, true, false); }), shapeErrorText([&] {
              ops::matmulShape({4, 8}, {9, 2}, true);
            }));
  // matmulAdd: the product's rule first, then a residual shaped like the product; no node.
  const size_t nodes = g.nodes().size();
  const Tensor w = g.input("w", {8, 2}), r = g.input("r", {4, 3});
  EXPECT_EQ(shapeErrorText([&] { g.matmulAdd(a, b, {}, r); }), shapeErrorText([&] {
              ops::matmulShape({4, 8}, {9, 2});
            }));
  EXPECT_NE(shapeErrorText([&] { g.matmulAdd(a, w, {}, r); }).find("the residual must be (4,2)"),
            std::string::npos);
  // matmulActivation: the product's rule; no node, no tensor.
  const size_t tensors = g.tensors().size();
  EXPECT_EQ(shapeErrorText([&] { g.matmulActivation(a, b, {}, ops::Activation::GeluTanh); }),
            shapeErrorText([&] {
              ops::matmulShape({4, 8}, {9, 2});
            }));
  EXPECT_EQ(g.nodes().size(), nodes);
  EXPECT_EQ(g.tensors().size(), tensors);

  const Tensor x = g.input("x", {3, 5}), v5 = g.input("v5", {5}), v4 = g.input("v4", {4});
  EXPECT_EQ(shapeErrorText([&] { g.layerNorm(x, v4, v5); }), shapeErrorText([&] {
              ops::layerNormStatsShape({3, 5}, {4}, {5}, 1e-5f);
            }));

  const Tensor t = g.input("t", {4}, DType::U32);
  EXPECT_EQ(shapeErrorText([&] { g.crossEntropy(x, t); }), shapeErrorText([&] {
              ops::crossEntropyShape({3, 5}, {4});
            }));

  const Tensor q = g.input("q", {2, 3, 2, 4}), k = g.input("k", {2, 5, 2, 4});
  const Tensor v = g.input("v", {2, 5, 2, 3});
  EXPECT_EQ(shapeErrorText([&] { g.attention(q, k, v); }), shapeErrorText([&] {
              ops::attentionLseShape({2, 3, 2, 4}, {2, 5, 2, 4}, {2, 5, 2, 3});
            }));

  const Tensor table = g.input("table", {10, 3, 4}),
               ids = g.input("ids", {2, 2, 2, 2, 2}, DType::U32);
  EXPECT_EQ(shapeErrorText([&] { g.gather(table, ids); }), shapeErrorText([&] {
              ops::gatherShape({10, 3, 4}, {2, 2, 2, 2, 2}, DType::U32, "gather");
            }));
  EXPECT_NE(shapeErrorText([&] { g.gather(table, ids); }).find("more than 6 dims"),
            std::string::npos);
}

}  // namespace
}  // namespace vkgrad::test
