#include "common/op_check.h"

#include <string>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/graph_gradcheck.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {

::testing::AssertionResult checkGraphOp(
    vk::Context& context, Rng& rng, const std::vector<Leaf>& leaves,
    const std::function<graph::Tensor(graph::Graph&, const std::vector<graph::Tensor>&)>& build,
    const std::function<std::vector<float>(const Values&)>& want, double tolerance,
    const std::vector<WordInput>& words) {
  graph::ParameterStore store(context);
  std::vector<const graph::Parameter*> params;
  for (size_t i = 0; i < leaves.size(); ++i)
    params.push_back(&store.add("leaf" + std::to_string(i), leaves[i].shape, leaves[i].init));
  store.initialize(rng.seed());

  graph::Graph g;
  std::vector<graph::Tensor> ts;
  for (const graph::Parameter* p : params) ts.push_back(g.parameter(*p));
  for (size_t i = 0; i < words.size(); ++i)
    ts.push_back(g.input("words" + std::to_string(i), words[i].shape, ops::DType::U32));
  const graph::Tensor out = build(g, ts);
  const ops::Shape out_shape = g.shape(out);
  const graph::Tensor w = g.constant("w", out_shape, rng.uniform(size_t(out_shape.numel())));
  const graph::Tensor loss = g.sum(g.mul(out, w));
  g.markOutput(out);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(context, g);
  for (size_t i = 0; i < words.size(); ++i)
    exec.setInput(ts[params.size() + i], std::span<const uint32_t>(words[i].values));
  exec.step();
  if (want) {
    Values values;
    for (const graph::Parameter* p : params) values.push_back(download(context, p->view()));
    auto forward = allClose(exec.read(out), want(values), tolerance);
    if (!forward) return forward << " (forward)";
  }
  return checkParameterGradients(
      context, store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng,
      lossGradCheckOptions(12));
}

int64_t flatIndex(const ops::Shape& shape, const std::vector<int64_t>& index) {
  int64_t flat = 0;
  for (int a = 0; a < shape.rank(); ++a) flat = flat * shape[a] + index[size_t(a)];
  return flat;
}

std::vector<int64_t> unflatIndex(const ops::Shape& shape, int64_t flat) {
  std::vector<int64_t> index(size_t(shape.rank()));
  for (int a = shape.rank() - 1; a >= 0; --a) index[size_t(a)] = flat % shape[a], flat /= shape[a];
  return index;
}

}  // namespace vkgrad::test
