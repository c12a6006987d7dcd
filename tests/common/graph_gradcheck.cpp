#include "common/graph_gradcheck.h"

#include <vector>

#include "common/device_tensor.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {

::testing::AssertionResult checkParameterGradients(
    vk::Context& context, const graph::ParameterStore& store, const graph::Graph& g,
    const graph::Gradients& grads, graph::Executor& exec, const std::function<double()>& value,
    Rng& rng, const GradCheckOptions& options) {
  const auto& params = store.all();
  std::vector<std::vector<float>> values;
  for (const auto& p : params) values.push_back(download(context, p->view()));
  exec.step();
  if (grads.parameters.size() != params.size())
    return ::testing::AssertionFailure()
           << grads.parameters.size() << " gradients for " << params.size() << " parameters";
  std::vector<std::vector<float>> analytic;
  for (const auto& p : params)
    for (const auto& [param, grad] : grads.parameters)
      if (g.tensor(param).parameter == p.get()) analytic.push_back(exec.read(grad));
  if (analytic.size() != params.size())
    return ::testing::AssertionFailure() << "only " << analytic.size() << " of the "
                                         << params.size() << " parameters have a gradient";

  std::vector<GradInput> inputs;
  for (size_t i = 0; i < values.size(); ++i)
    inputs.push_back({params[i]->name, &values[i], analytic[i]});
  auto loss = [&] {
    for (size_t i = 0; i < values.size(); ++i)
      context.staging().upload(*params[i]->buffer, params[i]->offset, values[i].data(),
                               values[i].size() * 4);
    exec.step();
    return value();
  };
  return checkGradients(loss, inputs, rng, options);
}

GradCheckOptions lossGradCheckOptions(int max_coords) {
  GradCheckOptions o;
  o.rel_step = 1e-2;
  o.tolerance = 1e-2;
  o.max_coords = max_coords;
  o.loss_ulps = 8;  // the loss is one f32 value after a chain of f32 ops
  return o;
}

}  // namespace vkgrad::test
