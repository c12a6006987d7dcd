// The graph's swiglu (engine/vkgrad/runtime/ops/swiglu.cpp): two tensors, the fused gate_up,
// and one tensor as both gate and up; forward against the CPU reference, gradients against
// finite differences.
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/swiglu.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphSwigluTest : public VkTest {
 protected:
  Rng rng_;
};

std::vector<float> swigluOf(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> y(gate.size());
  ops::ref::swiglu(gate.data(), up.data(), y.data(), int64_t(y.size()));
  return y;
}

TEST_F(GraphSwigluTest, TwoTensors) {
  SCOPED_TRACE(rng_.describe());
  const Shape s{3, 7};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{s, graph::Init::uniform(-4, 4)}, {s}},
      [](Graph& g, const std::vector<Tensor>& t) { return g.swiglu(t[0], t[1]); },
      [](const Values& v) { return swigluOf(v[0], v[1]); }, 1e-6));
}

TEST_F(GraphSwigluTest, FusedGateUp) {
  SCOPED_TRACE(rng_.describe());
  const int64_t f = 5;
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{{2, 3, 2 * f}, graph::Init::uniform(-4, 4)}},
      [](Graph& g, const std::vector<Tensor>& t) { return g.swiglu(t[0]); },
      [&](const Values& v) {
        std::vector<float> gate, up;
        for (size_t r = 0; r < 6; ++r)
          for (int64_t j = 0; j < f; ++j) {
            gate.push_back(v[0][r * 2 * f + size_t(j)]);
            up.push_back(v[0][r * 2 * f + size_t(f + j)]);
          }
        return swigluOf(gate, up);
      },
      1e-6));
}

TEST_F(GraphSwigluTest, OneTensorAsGateAndUp) {
  SCOPED_TRACE(rng_.describe());
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{{4, 6}, graph::Init::uniform(-3, 3)}},
      [](Graph& g, const std::vector<Tensor>& t) { return g.swiglu(t[0], t[0]); },
      [](const Values& v) { return swigluOf(v[0], v[0]); }, 1e-6));
}

TEST_F(GraphSwigluTest, RefusesBadShapes) {
  Graph g;
  const Tensor a = g.input("a", {2, 3}), b = g.input("b", {2, 4}), odd = g.input("odd", {2, 3});
  EXPECT_THROW(g.swiglu(a, b), ShapeError);
  EXPECT_THROW(g.swiglu(odd), ShapeError);
}

}  // namespace
}  // namespace vkgrad::test
