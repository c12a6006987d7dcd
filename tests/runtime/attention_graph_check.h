// Shared by the attention graph tests (tests/runtime/test_attention_graph.cpp and
// test_attention_gqa_graph.cpp): a fixture whose checkAllParameters compares every parameter's
// gradient with finite differences, and the cross-attention graph both build from separate
// projections.
#pragma once

#include <cstdint>
#include <functional>

#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {

class AttentionGraphFixture : public VkTest {
 protected:
  // Every parameter's analytic gradient (one step) against finite differences of value(),
  // which reads the scalar being differentiated after a step (common/graph_gradcheck.h).
  void checkAllParameters(graph::ParameterStore& store, const graph::Graph& g,
                          const graph::Gradients& grads, graph::Executor& exec,
                          const std::function<double()>& value);

  Rng rng_;
};

// Cross-attention from separate projections: q (B,Tq,H,D) from x (B,Tq,x_width), k and v
// (B,Tk,Hkv,D) from m (B,Tk,m_width), reshaped without copies; no mask, an explicit scale;
// then a head of `classes` and cross-entropy.
struct SeparateProjections {
  int64_t b, tq, tk, h, hkv, d, x_width, m_width, classes;
  float scale;
};

// Builds that graph (Xavier weights from `seed`, fresh random inputs) and checks wq's, wk's,
// wv's and the head's gradients against finite differences.
void checkSeparateProjections(vk::Context& context, Rng& rng, const SeparateProjections& c,
                              uint64_t seed);

}  // namespace vkgrad::test
