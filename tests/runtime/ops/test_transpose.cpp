// The graph's transpose (engine/vkgrad/runtime/ops/transpose.cpp): any permutation up to rank 6,
// forward exact against a CPU permutation and the gradient (the inverse permutation, added
// when the input has other uses) against finite differences.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphTransposeTest : public VkTest {
 protected:
  Rng rng_;
};

std::vector<float> permuted(const std::vector<float>& x, const Shape& s,
                            const std::vector<int>& perm) {
  int64_t dims[Shape::kMaxRank];
  for (size_t i = 0; i < perm.size(); ++i) dims[i] = s[perm[i]];
  const Shape out = Shape::of(dims, s.rank());
  std::vector<float> y(x.size());
  for (int64_t e = 0; e < out.numel(); ++e) {
    const auto oi = unflatIndex(out, e);
    std::vector<int64_t> xi(oi.size());
    for (size_t i = 0; i < perm.size(); ++i) xi[size_t(perm[i])] = oi[i];
    y[size_t(e)] = x[size_t(flatIndex(s, xi))];
  }
  return y;
}

TEST_F(GraphTransposeTest, AnyPermutationWithGradients) {
  SCOPED_TRACE(rng_.describe());
  struct Case {
    Shape x;
    std::vector<int> perm;
  };
  const Case cases[] = {
      {{3, 5}, {1, 0}}, {{2, 3, 5}, {2, 0, 1}}, {{2, 1, 3, 5, 2, 3}, {5, 3, 0, 2, 4, 1}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.str());
    EXPECT_TRUE(checkGraphOp(
        ctx(), rng_, {{c.x}},
        [&](Graph& g, const std::vector<Tensor>& t) { return g.transpose(t[0], c.perm); },
        [&](const Values& v) { return permuted(v[0], c.x, c.perm); }, 0.0));
  }
  // x read twice: the transpose's gradient adds to the other use's.
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{{4, 4}}},
      [&](Graph& g, const std::vector<Tensor>& t) {
        return g.add(g.transpose(t[0], {1, 0}), t[0]);
      },
      nullptr));
}

TEST(GraphTransposeShapeTest, BadPermutationsAreNamed) {
  Graph g;
  const Tensor x = g.input("x", {3, 4, 5});
  EXPECT_THROW(g.transpose(x, {0, 1}), ShapeError);
  EXPECT_THROW(g.transpose(x, {0, 1, 1}), ShapeError);
  EXPECT_THROW(g.transpose(x, {0, 1, 3}), ShapeError);
  EXPECT_EQ(g.shape(g.transpose(x, {2, 0, 1})), (Shape{5, 3, 4}));
  const Tensor ids = g.transpose(g.input("ids", {2, 3}, ops::DType::U32), {1, 0});
  EXPECT_EQ(g.tensor(ids).dtype, ops::DType::U32);
}

}  // namespace
}  // namespace vkgrad::test
