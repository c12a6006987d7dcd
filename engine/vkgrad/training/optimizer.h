// The optimizer as graph nodes, so that one compiled graph is forward + backward + update.
// What changes per step (the step count, Adam's bias corrections) is kept on the device by
// an AdvanceStep node (ops/optimizer.h); the learning rate is the first word of the state
// tensor, which a schedule may rewrite between steps (Executor::setLearningRate).
#pragma once

#include "vkgrad/ops/optimizer.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::graph {

// Dynamic loss scaling's device tensors (fp16 training, ops::updateLossScale): the scale, a
// State (1) f32 that seeds backward() in place of 1, and its counters (kLossScaleCounters u32).
struct LossScale {
  Tensor scale, counters;
  explicit operator bool() const { return bool(scale); }
};
// Adds both, the scale starting at options.init.
LossScale addLossScale(Graph& g, const ops::LossScaleOptions& options);

struct OptimizerConfig {
  enum class Kind { Sgd, AdamW };
  Kind kind = Kind::AdamW;
  float lr = 1e-3f;
  float beta1 = 0.9f, beta2 = 0.999f;  // AdamW
  ops::SgdOptions sgd;                 // momentum, coupled weight decay, Nesterov
  ops::AdamWOptions adamw;             // eps, decoupled weight decay
  // Weight decay on 1-D parameters (biases, norm gains) too; by default only on matrices.
  bool decay_vectors = false;
  // > 0: clip the gradients to a global norm of at most this. The updates scale each
  // gradient as they read it (ops::clipGradScale); the gradient tensors keep their values.
  float max_grad_norm = 0.0f;
  // Set: the gradients were seeded with loss_scale.scale. The updates divide it out, a step
  // whose gradients are not all finite is skipped (parameters, moments and the step count
  // stay), and the scale adapts (loss_scaling), all on the device.
  LossScale loss_scale;
  ops::LossScaleOptions loss_scaling;
};

// Appends the optional LossScale, AdvanceStep, the optional ClipGradNorm (folded into
// LossScale when both are on) and the updates of grads.parameters, with
// zeroed moment buffers: one SGD node per parameter, or one AdamW node for them all (one
// dispatch per parameter page when compiled: ops::adamwMany). Returns the optimizer state tensor (8
// u32 words: ops::OptimizerState). Throws Error when grads has no parameters.
Tensor addOptimizer(Graph& g, const Gradients& grads, const OptimizerConfig& config);

}  // namespace vkgrad::graph
