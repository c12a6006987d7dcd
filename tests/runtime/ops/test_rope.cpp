// The graph's rope (engine/vkgrad/runtime/ops/rope.cpp): forward against the CPU reference,
// with offset 0 and with the offset read from a position input; the gradient (the inverse
// rotation) against finite differences, also for x read twice.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/rope.h"
#include "vkgrad/ops/rope.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/rope.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphRopeTest : public VkTest {
 protected:
  Rng rng_;
};

std::vector<float> ropeOf(const std::vector<float>& x, const Shape& s, float theta,
                          uint32_t offset) {
  const std::vector<float> inv = ops::ropeInvFreq(s[3], theta);
  std::vector<float> y(x.size());
  ops::ref::rope(x.data(), inv.data(), y.data(), s[0], s[1], s[2], s[3], offset);
  return y;
}

TEST_F(GraphRopeTest, ForwardAndGradient) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{2, 3, 2, 6};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}}, [](Graph& g, const std::vector<Tensor>& t) { return g.rope(t[0]); },
      [&](const Values& v) { return ropeOf(v[0], x, 10000.0f, 0); }, 1e-6));
}

TEST_F(GraphRopeTest, PositionFromAnInput) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{1, 4, 3, 10};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}},
      [](Graph& g, const std::vector<Tensor>& t) { return g.rope(t[0], 500000.0f, t[1]); },
      [&](const Values& v) { return ropeOf(v[0], x, 500000.0f, 1234); }, 1e-6, {{{1}, {1234}}}));
}

TEST_F(GraphRopeTest, FusedQkvRotatesQueryAndKeyHeads) {
  SCOPED_TRACE(rng_.describe());
  // qkv (B,T,(2+2*1)*D) with 2 query heads and 1 key/value head, viewed as (B,T,4,D): the
  // first 3 heads turn, the value head is copied, and its gradient passes straight through.
  const Shape qkv{2, 3, 24}, heads{2, 3, 4, 6};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{qkv}},
      [&](Graph& g, const std::vector<Tensor>& t) {
        return graph::ropeHeads(g, g.reshape(t[0], heads), 10000.0f, t[1], 3);
      },
      [&](const Values& v) {
        const std::vector<float> inv = ops::ropeInvFreq(6, 10000.0f);
        std::vector<float> y(v[0].size());
        ops::ref::rope(v[0].data(), inv.data(), y.data(), 2, 3, 4, 6, 5, false, 3);
        return y;
      },
      1e-6, {{{1}, {5}}}));
}

TEST_F(GraphRopeTest, InputReadTwiceSharesTheTable) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{2, 2, 1, 4};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}},
      [](Graph& g, const std::vector<Tensor>& t) {
        const size_t before = g.tensors().size();
        const Tensor a = g.rope(t[0]);
        const Tensor b = g.rope(t[0]);  // the same inv_freq constant: one new tensor, b
        EXPECT_EQ(g.tensors().size(), before + 3);
        return g.add(a, b);
      },
      [&](const Values& v) {
        std::vector<float> y = ropeOf(v[0], x, 10000.0f, 0);
        for (float& e : y) e *= 2.0f;
        return y;
      },
      1e-6));
}

TEST_F(GraphRopeTest, RefusesBadArguments) {
  Graph g;
  const Tensor odd = g.input("odd", {1, 2, 3, 5});
  const Tensor flat = g.input("flat", {2, 8});
  const Tensor x = g.input("x", {1, 2, 3, 4});
  const Tensor fpos = g.input("fpos", {1});
  const Tensor pos2 = g.input("pos2", {2}, ops::DType::U32);
  EXPECT_THROW(g.rope(odd), ShapeError);
  EXPECT_THROW(g.rope(flat), ShapeError);
  EXPECT_THROW(g.rope(x, 10000.0f, fpos), ShapeError);  // f32 position
  EXPECT_THROW(g.rope(x, 10000.0f, pos2), ShapeError);  // two words
  EXPECT_THROW(g.rope(x, 0.5f), ShapeError);
  EXPECT_THROW(graph::ropeHeads(g, x, 10000.0f, {}, 4), ShapeError);  // x has 3 heads
}

}  // namespace
}  // namespace vkgrad::test
