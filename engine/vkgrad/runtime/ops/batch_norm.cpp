// batchNorm over the channel axis of x (N,C,...) (ops/batch_norm.h). In a training graph the
// node normalises with the batch's statistics, saves mean and rstd (f32) for the backward
// and updates the running statistics in place on every step (so it is never pruned); in an
// evaluation graph (Graph::setTraining(false)) a node without side effects normalises with
// the running statistics. Either backward writes dx, dgamma and dbeta in one kernel.
#include <string>
#include <utility>

#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/ops/batch_norm.h"

namespace vkgrad::graph {
namespace {

struct BatchNorm {
  enum In { x, gamma, beta, running_mean, running_var, kInputs };  // running: updated in place
  enum Out { y, mean, rstd, kOutputs };                            // mean, rstd: (C) f32
  struct Attrs {
    float eps = 1e-5f;
    float momentum = 0.1f;
  };
};

struct BatchNormInference {
  enum In { x, gamma, beta, running_mean, running_var, kInputs };
  enum Out { y, kOutputs };
  using Attrs = BatchNorm::Attrs;
};

struct BatchNormBackward {
  // stat0, stat1: the saved mean and rstd (training), or the running mean and variance.
  enum In { x, gamma, stat0, stat1, dy, kInputs };
  enum Out { dx, dgamma, dbeta, kOutputs };  // each -1 when not wanted, with its own mode
  struct Attrs {
    bool training = true;
    float eps = 1e-5f;
  };
};

// One node for every gradient wanted: the kernel takes a write mode per output.
void emitBackward(Backward& b, const Node& f, int stat0, int stat1, bool training, float eps) {
  int grads[3] = {-1, -1, -1};  // by forward input slot: x, gamma, beta
  ops::Write modes[3] = {};
  for (int in : {BatchNorm::x, BatchNorm::gamma, BatchNorm::beta}) {
    if (!b.needs(f, in)) continue;
    grads[in] = b.gradOf(f.inputs[size_t(in)]);
    modes[in] = b.contribute(grads[in]);
  }
  if (grads[0] < 0 && grads[1] < 0 && grads[2] < 0) return;
  b.graph().addNode(
      {OpKind::BatchNormBackward,
       {f.inputs[BatchNorm::x], f.inputs[BatchNorm::gamma], stat0, stat1, b.dout(f, BatchNorm::y)},
       {grads[0], grads[1], grads[2]},
       {modes[0], modes[1], modes[2]},
       BatchNormBackward::Attrs{training, eps}});
}

void backward(Backward& b, const Node& f) {
  emitBackward(b, f, f.outputs[BatchNorm::mean], f.outputs[BatchNorm::rstd], true,
               f.attr<BatchNorm::Attrs>().eps);
}

void backwardInference(Backward& b, const Node& f) {
  emitBackward(b, f, f.inputs[BatchNormInference::running_mean],
               f.inputs[BatchNormInference::running_var], false,
               f.attr<BatchNormInference::Attrs>().eps);
}

void launch(const Launch& l) {
  using F = BatchNorm;
  const F::Attrs& a = l.attr<F::Attrs>();
  const ops::BatchNormRunning running{l.in(F::running_mean), l.in(F::running_var), a.momentum};
  ops::batchNorm(l.rec, l.in(F::x), l.in(F::gamma), l.in(F::beta), l.out(F::y), l.out(F::mean),
                 l.out(F::rstd), a.eps, &running);
}

void launchInference(const Launch& l) {
  using F = BatchNormInference;
  ops::batchNormInference(l.rec, l.in(F::x), l.in(F::gamma), l.in(F::beta), l.in(F::running_mean),
                          l.in(F::running_var), l.out(F::y), l.attr<F::Attrs>().eps);
}

void launchBackward(const Launch& l) {
  using B = BatchNormBackward;
  const B::Attrs& a = l.attr<B::Attrs>();
  const ops::BatchNormGrads grads{l.out(B::dx),   l.out(B::dgamma),   l.out(B::dbeta),
                                  l.write(B::dx), l.write(B::dgamma), l.write(B::dbeta)};
  ops::batchNormBackward(l.rec, l.in(B::x), l.in(B::gamma), l.in(B::stat0), l.in(B::stat1),
                         l.in(B::dy), grads, a.training, a.eps);
}

}  // namespace

Tensor Graph::batchNorm(Tensor x, Tensor gamma, Tensor beta, Tensor running_mean,
                        Tensor running_var, float eps, float momentum) {
  for (Tensor t : {x, gamma, beta, running_mean, running_var}) check(t, "batchNorm");
  const std::string op = describe("batchNorm", {x, gamma, beta, running_mean, running_var});
  for (Tensor t : {x, gamma, beta, running_mean, running_var})
    if (tensor(t).dtype != DType::F32) throw ShapeError(op + ": every tensor must be f32");
  const Shape sx = shape(x);  // a copy: output() may move tensors_
  const Shape stats = ops::batchNormStatsShape(sx, shape(gamma), shape(beta), eps, training_);
  for (Tensor t : {running_mean, running_var}) {
    const TensorInfo& info = tensor(t);
    const bool persistent = info.kind == TensorKind::Parameter || info.kind == TensorKind::Input ||
                            info.kind == TensorKind::State;
    if (!persistent || info.root != t.id)
      throw ShapeError(op + ": the running statistics must be whole persistent tensors " +
                       "(parameters that are never trained, or inputs)");
    if (!(info.shape == stats))
      throw ShapeError(op + ": the running statistics must be " + stats.str());
  }
  if (!(momentum >= 0.0f && momentum <= 1.0f))
    throw ShapeError(op + ": momentum must be in [0, 1], got " + std::to_string(momentum));
  // A recomputed segment runs its nodes twice in a step: the running statistics would move
  // twice.
  if (training_ && in_segment_)
    throw Error(op + ": a training batchNorm cannot sit in a recomputed segment");
  // Constants of the step, never trained: autograd gives them no gradient, so no optimizer
  // updates them (a ParameterStore still saves them with the parameters).
  tensors_[size_t(running_mean.id)].differentiable = false;
  tensors_[size_t(running_var.id)].differentiable = false;
  const int y = output(sx);
  const BatchNorm::Attrs attrs{eps, momentum};
  if (!training_) {
    addNode({OpKind::BatchNormInference,
             {x.id, gamma.id, beta.id, running_mean.id, running_var.id},
             {y},
             {},
             attrs});
    return {y};
  }
  const int mean = output(stats, DType::F32, false, "batchNorm.mean");
  const int rstd = output(stats, DType::F32, false, "batchNorm.rstd");
  addNode({OpKind::BatchNorm,
           {x.id, gamma.id, beta.id, running_mean.id, running_var.id},
           {y, mean, rstd},
           {},
           attrs});
  return {y};
}

namespace defs {
const OpDef kBatchNorm{.name = "batchNorm",
                       .inputs = BatchNorm::kInputs,
                       .outputs = BatchNorm::kOutputs,
                       .side_effects = true,  // the running statistics
                       .f32_outputs = (1u << BatchNorm::mean) | (1u << BatchNorm::rstd),
                       .backward = backward,
                       .launch = launch};
const OpDef kBatchNormInference{.name = "batchNormInference",
                                .inputs = BatchNormInference::kInputs,
                                .outputs = BatchNormInference::kOutputs,
                                .backward = backwardInference,
                                .launch = launchInference};
const OpDef kBatchNormBackward{.name = "batchNormBackward",
                               .inputs = BatchNormBackward::kInputs,
                               .outputs = BatchNormBackward::kOutputs,
                               .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
