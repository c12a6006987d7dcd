// addOptimizer and addLossScale (training/optimizer.h): the nodes that update the parameters
// after a backward pass, built from the slots of runtime/ops/optimizer_nodes.h. Training code:
// in vkgrad::graph, not in the inference library.
#include "vkgrad/training/optimizer.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/ops/optimizer_nodes.h"

namespace vkgrad::graph {

using namespace nodes;

namespace {

// The segment table of a many-tensor node: a graph temporary, written by the node itself.
int tableTensor(Graph& g, size_t tensors) {
  return g.newTensor(
      {"optimizer.table", {ops::segmentTableWords(tensors)}, DType::U32, TensorKind::Activation});
}

// A persistent tensor set once when compiled: zeros unless data is given (the Executor zeroes
// state on the device: moments get no host copy).
int stateTensor(Graph& g, const std::string& name, const Shape& shape, DType dtype,
                std::vector<uint32_t> data = {}) {
  TensorInfo info{name, shape, dtype, TensorKind::State};
  info.differentiable = false;
  info.data = std::move(data);
  if (!info.data.empty()) info.data.resize(size_t(shape.numel()), 0u);
  return g.newTensor(std::move(info));
}

}  // namespace

LossScale addLossScale(Graph& g, const ops::LossScaleOptions& options) {
  uint32_t bits;
  std::memcpy(&bits, &options.init, 4);
  return {Tensor{stateTensor(g, "loss_scale", {1}, DType::F32, {bits})},
          Tensor{stateTensor(g, "loss_scale.counters", {ops::kLossScaleCounters}, DType::U32)}};
}

Tensor addOptimizer(Graph& g, const Gradients& grads, const OptimizerConfig& config) {
  if (grads.parameters.empty()) throw Error("addOptimizer: no parameter has a gradient");
  const ops::OptimizerState init = ops::OptimizerState::make(config.lr, config.beta1, config.beta2);
  std::vector<uint32_t> words(8);
  std::memcpy(words.data(), &init, sizeof(init));
  const int state = stateTensor(g, "optimizer.state", {8}, DType::U32, std::move(words));
  if (config.loss_scale) {
    // Before AdvanceStep: a skipped step does not count.
    std::vector<ops::TensorView> views;
    Node update{OpKind::LossScaleUpdate,
                {},
                {},
                {},
                LossScaleUpdate::Attrs{config.max_grad_norm, config.loss_scaling}};
    for (const auto& [param, grad] : grads.parameters) {
      views.push_back({nullptr, 0, g.shape(grad)});
      update.inputs.push_back(grad.id);
    }
    const int scratch =
        stateTensor(g, "loss_scale.norm_scratch", {ops::gradNormScratch(views)}, DType::F32);
    const int norm = stateTensor(g, "loss_scale.norm", {2}, DType::F32);
    for (int fixed :
         {scratch, norm, config.loss_scale.scale.id, config.loss_scale.counters.id, state})
      update.inputs.push_back(fixed);
    update.outputs = {tableTensor(g, grads.parameters.size())};
    g.addNode(std::move(update));
  }
  g.addNode({OpKind::AdvanceStep, {state}, {}});

  if (config.max_grad_norm > 0 && !config.loss_scale) {
    std::vector<ops::TensorView> views;  // shapes only: the scratch size depends on nothing else
    Node clip{OpKind::ClipGradNorm, {}, {}, {}, ClipGradNorm::Attrs{config.max_grad_norm}};
    for (const auto& [param, grad] : grads.parameters) {
      views.push_back({nullptr, 0, g.shape(grad)});
      clip.inputs.push_back(grad.id);
    }
    const int scratch =
        stateTensor(g, "optimizer.norm_scratch", {ops::gradNormScratch(views)}, DType::F32);
    const int norm = stateTensor(g, "optimizer.norm", {2}, DType::F32);
    for (int fixed : {scratch, norm, state}) clip.inputs.push_back(fixed);
    clip.outputs = {tableTensor(g, grads.parameters.size())};
    g.addNode(std::move(clip));
  }

  Node adamw{OpKind::AdamWUpdate, {}, {}, {}, {}};
  AdamWUpdate::Attrs adamw_attrs{config.adamw, {}};
  for (const auto& [param, grad] : grads.parameters) {
    // Copies: adding state tensors may move the graph's tensor list.
    const std::string name = g.tensor(param).name;
    const Shape shape = g.tensor(param).shape;
    const bool decay = config.decay_vectors || shape.rank() > 1;
    if (config.kind == OptimizerConfig::Kind::Sgd) {
      SgdUpdate::Attrs sgd = config.sgd;
      if (!decay) sgd.weight_decay = 0.0f;
      const int velocity = stateTensor(g, name + ".velocity", shape, DType::F32);
      g.addNode({OpKind::SgdUpdate, {param.id, grad.id, velocity, state}, {}, {}, sgd});
    } else {
      const int m = stateTensor(g, name + ".m", shape, DType::F32);
      const int v = stateTensor(g, name + ".v", shape, DType::F32);
      adamw.inputs.insert(adamw.inputs.end(), {param.id, grad.id, m, v});
      adamw_attrs.weight_decay.push_back(decay ? config.adamw.weight_decay : 0.0f);
    }
  }
  if (!adamw.inputs.empty()) {
    adamw.inputs.push_back(state);
    adamw.outputs = {tableTensor(g, adamw_attrs.weight_decay.size())};
    adamw.attrs = std::move(adamw_attrs);
    g.addNode(std::move(adamw));
  }
  return Tensor{state};
}

}  // namespace vkgrad::graph
