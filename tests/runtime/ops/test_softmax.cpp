// The graph's softmax and logSoftmax (engine/vkgrad/runtime/ops/softmax.cpp) on every axis:
// forward against a CPU softmax, gradients against finite differences.
#include <cmath>
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

class GraphSoftmaxTest : public VkTest {
 protected:
  Rng rng_;
};

std::vector<float> softmaxAlong(const std::vector<float>& x, const Shape& s, int axis, bool log) {
  std::vector<float> y(x.size());
  for (int64_t e = 0; e < s.numel(); ++e) {
    auto i = unflatIndex(s, e);
    double max = -1e300, sum = 0;
    for (int64_t k = 0; k < s[axis]; ++k) {
      i[size_t(axis)] = k;
      max = std::max(max, double(x[size_t(flatIndex(s, i))]));
    }
    for (int64_t k = 0; k < s[axis]; ++k) {
      i[size_t(axis)] = k;
      sum += std::exp(double(x[size_t(flatIndex(s, i))]) - max);
    }
    const double v = double(x[size_t(e)]) - max;
    y[size_t(e)] = float(log ? v - std::log(sum) : std::exp(v) / sum);
  }
  return y;
}

TEST_F(GraphSoftmaxTest, EveryAxisWithGradients) {
  SCOPED_TRACE(rng_.describe());
  const Shape x{3, 5, 4};
  for (bool log : {false, true})
    for (int axis : {0, 1, 2, -1}) {
      SCOPED_TRACE(testing::Message() << (log ? "logSoftmax" : "softmax") << " axis " << axis);
      EXPECT_TRUE(checkGraphOp(
          ctx(), rng_, {{x, graph::Init::uniform(-3, 3)}},
          [&](Graph& g, const std::vector<Tensor>& t) {
            return log ? g.logSoftmax(t[0], axis) : g.softmax(t[0], axis);
          },
          [&](const Values& v) { return softmaxAlong(v[0], x, axis < 0 ? axis + 3 : axis, log); },
          2e-6));
    }
}

}  // namespace
}  // namespace vkgrad::test
