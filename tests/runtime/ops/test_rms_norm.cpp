// The graph's rmsNorm (engine/vkgrad/runtime/ops/rms_norm.cpp): forward against the CPU
// reference, gradients of x and gamma against finite differences through the compiled graph,
// alone and with x read twice (its gradient then adds two contributions).
#include <vector>

#include <gtest/gtest.h>

#include "common/op_check.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/rms_norm.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;
using ops::Shape;

class GraphRmsNormTest : public VkTest {
 protected:
  Rng rng_;
};

std::vector<float> rmsNormOf(const Values& v, const Shape& x, float eps) {
  std::vector<float> y(v[0].size()), rstd(size_t(x.rows()));
  ops::ref::rmsNorm(v[0].data(), v[1].data(), y.data(), rstd.data(), x.rows(), x.back(), eps);
  return y;
}

TEST_F(GraphRmsNormTest, ForwardAndGradients) {
  SCOPED_TRACE(rng_.describe());
  // A short row per invocation, a long one per workgroup; 67 rows: dgamma in two blocks.
  for (const Shape& x : {Shape{3, 5, 9}, Shape{2, 70}, Shape{67, 3}}) {
    SCOPED_TRACE(x.str());
    EXPECT_TRUE(checkGraphOp(
        ctx(), rng_,
        {{x, graph::Init::uniform(-2, 2)}, {{x.back()}, graph::Init::uniform(0.5f, 1.5f)}},
        [](Graph& g, const std::vector<Tensor>& t) { return g.rmsNorm(t[0], t[1], 1e-5f); },
        [&](const Values& v) { return rmsNormOf(v, x, 1e-5f); }, 2e-6));
  }
}

TEST_F(GraphRmsNormTest, InputReadTwice) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{4, 11};
  EXPECT_TRUE(checkGraphOp(
      ctx(), rng_, {{x}, {{11}, graph::Init::uniform(0.5f, 1.5f)}},
      [](Graph& g, const std::vector<Tensor>& t) { return g.add(g.rmsNorm(t[0], t[1]), t[0]); },
      [&](const Values& v) {
        std::vector<float> y = rmsNormOf(v, x, 1e-6f);
        for (size_t i = 0; i < y.size(); ++i) y[i] += v[0][i];
        return y;
      },
      2e-6));
}

}  // namespace
}  // namespace vkgrad::test
