// The optimizer's nodes (graph/optimizer.h): AdvanceStep, ClipGradNorm, and one SGD update per
// parameter or one AdamW update of every parameter (ops/optim.h). They update persistent
// tensors in place, so they are never pruned, and addOptimizer is their only builder.
#include <cstring>
#include <limits>
#include <vector>

#include "vkgrad/graph/launch.h"
#include "vkgrad/graph/ops/defs.h"
#include "vkgrad/graph/optimizer.h"

namespace vkgrad::graph {
namespace {

struct AdvanceStep {
  enum In { state, kInputs };  // state: ops::OptimizerState, 8 words
  enum Out { kOutputs };
};

// Variadic: the gradients first, then these.
struct ClipGradNorm {
  enum In { scratch, norm, state, kInputs };  // the clip factor goes into the state
  enum Out { table, kOutputs };               // u32: the segment table (ops/optim.h)
  struct Attrs {
    float max_norm = 0.0f;
  };
};

// Variadic: the gradients first, then these. The norm of the scaled gradients, then
// ops::updateLossScale.
struct LossScaleUpdate {
  enum In { scratch, norm, scale, counters, state, kInputs };
  enum Out { table, kOutputs };  // u32: the segment table
  struct Attrs {
    float max_norm = 0.0f;  // 0: no clipping
    ops::LossScaleOptions options;
  };
};

struct SgdUpdate {
  enum In { param, grad, velocity, state, kInputs };
  enum Out { kOutputs };
  using Attrs = ops::SgdOptions;
};

// Variadic: param, grad, m, v of every parameter in turn, then the state. One node updates
// them all (ops::adamwMany: one dispatch where the executor's flat buffers hold them).
struct AdamWUpdate {
  enum Each { param, grad, m, v, kEach };
  enum In { state, kInputs };
  enum Out { table, kOutputs };  // u32: the segment table
  struct Attrs {
    ops::AdamWOptions options;        // its weight_decay unused: each tensor has its own
    std::vector<float> weight_decay;  // per parameter
  };
};

void launchAdvance(const Launch& l) {
  ops::advanceStep(l.rec, l.in(AdvanceStep::state));
}

void launchClip(const Launch& l) {
  const size_t grads = l.node.inputs.size() - ClipGradNorm::kInputs;
  std::vector<ops::TensorView> views;
  for (size_t i = 0; i < grads; ++i) views.push_back(l.view(l.node.inputs[i]));
  auto fixed = [&](ClipGradNorm::In slot) { return l.view(l.node.inputs[grads + slot]); };
  ops::clipGradScale(l.rec, views, l.attr<ClipGradNorm::Attrs>().max_norm,
                     fixed(ClipGradNorm::scratch), fixed(ClipGradNorm::norm),
                     fixed(ClipGradNorm::state), l.out(ClipGradNorm::table));
}

void launchLossScale(const Launch& l) {
  using U = LossScaleUpdate;
  const size_t grads = l.node.inputs.size() - U::kInputs;
  std::vector<ops::TensorView> views;
  for (size_t i = 0; i < grads; ++i) views.push_back(l.view(l.node.inputs[i]));
  auto fixed = [&](U::In slot) { return l.view(l.node.inputs[grads + slot]); };
  const U::Attrs& at = l.attr<U::Attrs>();
  ops::gradNorm(l.rec, views, fixed(U::scratch), fixed(U::norm),
                std::numeric_limits<float>::infinity(), l.out(U::table));
  ops::updateLossScale(l.rec, fixed(U::norm), fixed(U::scale), fixed(U::counters),
                       fixed(U::state), at.max_norm, at.options);
}

void launchSgd(const Launch& l) {
  using U = SgdUpdate;
  ops::sgd(l.rec, l.in(U::param), l.in(U::grad), l.in(U::velocity), l.in(U::state),
           l.attr<U::Attrs>());
}

void launchAdamW(const Launch& l) {
  using U = AdamWUpdate;
  const U::Attrs& attrs = l.attr<U::Attrs>();
  std::vector<ops::AdamWTensor> tensors(attrs.weight_decay.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto each = [&](U::Each slot) { return l.in(int(U::kEach * i) + slot); };
    tensors[i] = {each(U::param), each(U::grad), each(U::m), each(U::v), attrs.weight_decay[i]};
  }
  ops::adamwMany(l.rec, tensors, l.in(int(U::kEach * tensors.size()) + U::state), l.out(U::table),
                 attrs.options);
}

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
    Node update{OpKind::LossScaleUpdate, {}, {}, {}, LossScaleUpdate::Attrs{config.max_grad_norm, config.loss_scaling}};
    for (const auto& [param, grad] : grads.parameters) {
      views.push_back({nullptr, 0, g.shape(grad)});
      update.inputs.push_back(grad.id);
    }
    const int scratch =
        stateTensor(g, "loss_scale.norm_scratch", {ops::gradNormScratch(views)}, DType::F32);
    const int norm = stateTensor(g, "loss_scale.norm", {2}, DType::F32);
    for (int fixed : {scratch, norm, config.loss_scale.scale.id, config.loss_scale.counters.id, state})
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

namespace defs {
const OpDef kAdvanceStep{.name = "advanceStep",
                         .inputs = AdvanceStep::kInputs,
                         .outputs = AdvanceStep::kOutputs,
                         .side_effects = true,
                         .launch = launchAdvance};
const OpDef kClipGradNorm{.name = "clipGradNorm",
                          .inputs = ClipGradNorm::kInputs,
                          .outputs = ClipGradNorm::kOutputs,
                          .variadic = true,
                          .side_effects = true,
                          .launch = launchClip};
const OpDef kLossScaleUpdate{.name = "lossScale",
                             .inputs = LossScaleUpdate::kInputs,
                             .outputs = LossScaleUpdate::kOutputs,
                             .variadic = true,
                             .side_effects = true,
                             .launch = launchLossScale};
const OpDef kSgdUpdate{.name = "sgd",
                       .inputs = SgdUpdate::kInputs,
                       .outputs = SgdUpdate::kOutputs,
                       .side_effects = true,
                       .launch = launchSgd};
const OpDef kAdamWUpdate{.name = "adamw",
                         .inputs = AdamWUpdate::kInputs,
                         .outputs = AdamWUpdate::kOutputs,
                         .variadic = true,
                         .side_effects = true,
                         .launch = launchAdamW};
}  // namespace defs

}  // namespace vkgrad::graph
