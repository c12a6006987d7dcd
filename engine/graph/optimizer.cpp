#include "graph/optimizer.h"

#include <cstring>

#include "vk/error.h"

namespace vkgrad::graph {
namespace {

// A persistent tensor set once when compiled: zeros unless data is given.
int stateTensor(Graph& g, const std::string& name, const Shape& shape, DType dtype,
                std::vector<uint32_t> data = {}) {
  TensorInfo info{name, shape, dtype, TensorKind::State};
  info.differentiable = false;
  info.data = std::move(data);
  info.data.resize(size_t(shape.numel()), 0u);
  return g.newTensor(std::move(info));
}

}  // namespace

Tensor addOptimizer(Graph& g, const Gradients& grads, const OptimizerConfig& config) {
  if (grads.parameters.empty()) throw Error("addOptimizer: no parameter has a gradient");
  const ops::OptimizerState init = ops::OptimizerState::make(config.lr, config.beta1, config.beta2);
  std::vector<uint32_t> words(8);
  std::memcpy(words.data(), &init, sizeof(init));
  const int state = stateTensor(g, "optimizer.state", {8}, DType::U32, std::move(words));
  g.addNode({OpKind::AdvanceStep, {state}, {}});

  if (config.max_grad_norm > 0) {
    std::vector<ops::TensorView> views;  // shapes only: the scratch size depends on nothing else
    Node clip{OpKind::ClipGradNorm, {}, {}};
    for (const auto& [param, grad] : grads.parameters) {
      views.push_back({nullptr, 0, g.shape(grad)});
      clip.inputs.push_back(grad.id);
    }
    clip.inputs.push_back(
        stateTensor(g, "optimizer.norm_scratch", {ops::gradNormScratch(views)}, DType::F32));
    clip.inputs.push_back(stateTensor(g, "optimizer.norm", {2}, DType::F32));
    clip.inputs.push_back(state);  // where the clip factor goes, for the updates to read
    clip.attrs.param = config.max_grad_norm;
    g.addNode(std::move(clip));
  }

  for (const auto& [param, grad] : grads.parameters) {
    // Copies: adding state tensors may move the graph's tensor list.
    const std::string name = g.tensor(param).name;
    const Shape shape = g.tensor(param).shape;
    const bool decay = config.decay_vectors || shape.rank() > 1;
    Node node{OpKind::SgdUpdate, {param.id, grad.id}, {}};
    node.attrs.sgd = config.sgd;
    node.attrs.adamw = config.adamw;
    if (!decay) node.attrs.sgd.weight_decay = node.attrs.adamw.weight_decay = 0.0f;
    if (config.kind == OptimizerConfig::Kind::Sgd) {
      node.inputs.push_back(stateTensor(g, name + ".velocity", shape, DType::F32));
    } else {
      node.op = OpKind::AdamWUpdate;
      node.inputs.push_back(stateTensor(g, name + ".m", shape, DType::F32));
      node.inputs.push_back(stateTensor(g, name + ".v", shape, DType::F32));
    }
    node.inputs.push_back(state);
    g.addNode(std::move(node));
  }
  return Tensor{state};
}

}  // namespace vkgrad::graph
