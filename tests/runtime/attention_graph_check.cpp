#include "runtime/attention_graph_check.h"

#include <gtest/gtest.h>

namespace vkgrad::test {

using graph::Graph;
using graph::Init;
using graph::Tensor;

namespace {

::testing::AssertionResult checkLoss(vk::Context& context, graph::ParameterStore& store,
                                     const Graph& g, const graph::Gradients& grads,
                                     graph::Executor& exec, const std::function<double()>& value,
                                     Rng& rng) {
  return checkParameterGradients(context, store, g, grads, exec, value, rng,
                                 lossGradCheckOptions(10));
}

}  // namespace

void AttentionGraphFixture::checkAllParameters(graph::ParameterStore& store, const Graph& g,
                                               const graph::Gradients& grads, graph::Executor& exec,
                                               const std::function<double()>& value) {
  EXPECT_TRUE(checkLoss(ctx(), store, g, grads, exec, value, rng_)) << rng_.describe();
}

void checkSeparateProjections(vk::Context& context, Rng& rng, const SeparateProjections& c,
                              uint64_t seed) {
  const int64_t q_width = c.h * c.d, kv_width = c.hkv * c.d;
  graph::ParameterStore store(context);
  store.add("wq", {c.x_width, q_width}, Init::xavierUniform());
  store.add("wk", {c.m_width, kv_width}, Init::xavierUniform());
  store.add("wv", {c.m_width, kv_width}, Init::xavierUniform());
  store.add("head", {q_width, c.classes}, Init::xavierUniform());
  store.initialize(seed);
  Graph g;
  auto p = [&](const char* name) { return g.parameter(store.at(name)); };
  const Tensor x = g.input("x", {c.b, c.tq, c.x_width}), m = g.input("m", {c.b, c.tk, c.m_width});
  const Tensor y = g.input("y", {c.b, c.tq}, ops::DType::U32);
  const Tensor q = g.reshape(g.matmul(x, p("wq")), {c.b, c.tq, c.h, c.d});
  const Tensor k = g.reshape(g.matmul(m, p("wk")), {c.b, c.tk, c.hkv, c.d});
  const Tensor v = g.reshape(g.matmul(m, p("wv")), {c.b, c.tk, c.hkv, c.d});
  const Tensor o = g.reshape(g.attention(q, k, v, false, c.scale), {c.b, c.tq, q_width});
  const Tensor loss = g.crossEntropy(g.matmul(o, p("head")), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(context, g);
  exec.setInput(x, rng.normal(size_t(c.b * c.tq * c.x_width)));
  exec.setInput(m, rng.normal(size_t(c.b * c.tk * c.m_width)));
  exec.setInput(y, rng.below(size_t(c.b * c.tq), uint32_t(c.classes)));
  EXPECT_TRUE(checkLoss(
      context, store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng))
      << rng.describe();
}

}  // namespace vkgrad::test
