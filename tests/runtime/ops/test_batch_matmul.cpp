// The graph's batchMatmul (engine/vkgrad/runtime/ops/batch_matmul.cpp): numpy's matmul on ranks
// 2 to 4 with batch axes broadcast on both sides and either operand transposed, forward
// against a CPU product and gradients against finite differences.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphBatchMatmulTest : public VkTest {
 protected:
  Rng rng_;
};

// (..., M, K) x (..., K, N) in double, batch axes broadcast, transposes as stored.
std::vector<float> product(const std::vector<float>& a, const Shape& sa, bool ta,
                           const std::vector<float>& b, const Shape& sb, bool tb,
                           const Shape& out) {
  const int r = out.rank();
  const int64_t k = ta ? sa[sa.rank() - 2] : sa[sa.rank() - 1];
  std::vector<float> c(size_t(out.numel()));
  for (int64_t e = 0; e < out.numel(); ++e) {
    const auto oi = unflatIndex(out, e);
    // An operand's element (row, col) of the matrix its batch index picks (broadcast: 0).
    auto at = [&](const std::vector<float>& x, const Shape& s, int64_t row, int64_t col) {
      std::vector<int64_t> xi(size_t(s.rank()));
      for (int a = 0; a < s.rank() - 2; ++a) {
        const int64_t o = oi[size_t(r - s.rank() + a)];
        xi[size_t(a)] = s[a] == 1 ? 0 : o;
      }
      xi[size_t(s.rank() - 2)] = row, xi[size_t(s.rank() - 1)] = col;
      return double(x[size_t(flatIndex(s, xi))]);
    };
    double sum = 0;
    const int64_t i = oi[size_t(r - 2)], j = oi[size_t(r - 1)];
    for (int64_t p = 0; p < k; ++p)
      sum += (ta ? at(a, sa, p, i) : at(a, sa, i, p)) * (tb ? at(b, sb, j, p) : at(b, sb, p, j));
    c[size_t(e)] = float(sum);
  }
  return c;
}

TEST_F(GraphBatchMatmulTest, BroadcastBatchesAndTransposesWithGradients) {
  SCOPED_TRACE(rng_.describe());
  struct Case {
    Shape a, b;
    bool ta, tb;
    Shape out;
  };
  const Case cases[] = {
      {{2, 3, 4, 5}, {2, 3, 5, 6}, false, false, {2, 3, 4, 6}},
      {{2, 1, 4, 5}, {3, 5, 6}, false, false, {2, 3, 4, 6}},  // a and b each broadcast
      {{3, 5, 4}, {6, 5}, true, true, {3, 4, 6}},
      {{4, 5}, {2, 3, 6, 5}, false, true, {2, 3, 4, 6}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message() << c.a.str() << " x " << c.b.str());
    EXPECT_TRUE(checkGraphOp(
        ctx(), rng_, {{c.a}, {c.b}},
        [&](Graph& g, const std::vector<Tensor>& t) {
          const Tensor y = g.batchMatmul(t[0], t[1], c.ta, c.tb);
          EXPECT_EQ(g.shape(y), c.out);
          return y;
        },
        [&](const Values& v) { return product(v[0], c.a, c.ta, v[1], c.b, c.tb, c.out); }, 1e-5));
  }
}

TEST(GraphBatchMatmulShapeTest, BadShapesAreNamed) {
  Graph g;
  EXPECT_THROW(g.batchMatmul(g.input("a", {2, 4, 5}), g.input("b", {3, 5, 6})), ShapeError);
  EXPECT_THROW(g.batchMatmul(g.input("c", {4, 5}), g.input("d", {4, 6})), ShapeError);
  EXPECT_THROW(g.batchMatmul(g.input("e", {5}), g.input("f", {5, 6})), ShapeError);
}

}  // namespace
}  // namespace vkgrad::test
