// layerNorm over the last axis (ops/layer_norm.h): y = (x - mean) * rstd * gamma + beta, with
// mean and rstd saved per row for the backward, which writes dx, dgamma and dbeta in one
// kernel.
#include <utility>

#include "vkgrad/ops/layer_norm.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct LayerNorm {
  enum In { x, gamma, beta, kInputs };
  enum Out { y, mean, rstd, kOutputs };  // mean, rstd: (rows)
  struct Attrs {
    float eps = 1e-5f;
  };
};

struct LayerNormBackward {
  // addend: -1, or a tensor added to dx in the same kernel (Backward::takeAddend).
  enum In { x, gamma, mean, rstd, dy, addend, kInputs };
  // dx is always written (a temporary when x needs no gradient); dgamma and dbeta are -1 when
  // not wanted and share one write mode; scratch is -1 when neither is.
  enum Out { dx, dgamma, dbeta, scratch, kOutputs };
};

// The kernel writes dx under its own mode and dgamma, dbeta under one shared mode. So one
// node, unless dgamma and dbeta need different modes: then a second node for one of them,
// which writes its dx into a temporary (as does a node whose x needs no gradient).
void backward(Backward& b, const Node& f) {
  Graph& g = b.graph();
  const int x = f.inputs[LayerNorm::x];
  const Shape sx = g.tensor(x).shape;  // a copy: temp() adds tensors
  int grads[3] = {-1, -1, -1};         // by forward input slot: x, gamma, beta
  ops::Write modes[3] = {};
  int addend = -1;  // added to dx by the kernel: a residual stream's gradient
  for (int in : {LayerNorm::x, LayerNorm::gamma, LayerNorm::beta}) {
    if (!b.needs(f, in)) continue;
    grads[in] = b.gradOf(f.inputs[size_t(in)]);
    if (in == LayerNorm::x) addend = b.takeAddend(grads[in]);
    modes[in] = b.contribute(grads[in]);
  }
  bool dx_done = grads[LayerNorm::x] < 0;
  auto emitNode = [&](int dgamma, int dbeta, ops::Write params_mode) {
    ops::Write dx_mode = ops::Write::Overwrite;
    int dx = -1, dx_addend = -1;
    if (!dx_done) {
      dx = grads[LayerNorm::x];
      dx_mode = modes[LayerNorm::x];
      dx_addend = addend;
      dx_done = true;
    } else {
      dx = b.temp(sx, "layerNorm.dx_unused");
    }
    const int scratch =
        dgamma >= 0 || dbeta >= 0
            ? b.temp({ops::layerNormBackwardScratch(sx.rows(), sx.back())}, "layerNorm.scratch")
            : -1;
    Node node{OpKind::LayerNormBackward,
              {x, f.inputs[LayerNorm::gamma], f.outputs[LayerNorm::mean],
               f.outputs[LayerNorm::rstd], b.dout(f, LayerNorm::y), dx_addend},
              {dx, dgamma, dbeta, scratch},
              {dx_mode, params_mode, params_mode, ops::Write::Overwrite}};
    g.addNode(std::move(node));
  };
  for (ops::Write mode : {ops::Write::Overwrite, ops::Write::Accumulate}) {
    const int dgamma = grads[LayerNorm::gamma] >= 0 && modes[LayerNorm::gamma] == mode
                           ? grads[LayerNorm::gamma]
                           : -1;
    const int dbeta =
        grads[LayerNorm::beta] >= 0 && modes[LayerNorm::beta] == mode ? grads[LayerNorm::beta] : -1;
    if (dgamma >= 0 || dbeta >= 0) emitNode(dgamma, dbeta, mode);
  }
  if (!dx_done) emitNode(-1, -1, ops::Write::Overwrite);  // dx alone
}

void launch(const Launch& l) {
  ops::layerNorm(l.rec, l.in(LayerNorm::x), l.in(LayerNorm::gamma), l.in(LayerNorm::beta),
                 l.out(LayerNorm::y), l.out(LayerNorm::mean), l.out(LayerNorm::rstd),
                 l.attr<LayerNorm::Attrs>().eps);
}

void launchBackward(const Launch& l) {
  using B = LayerNormBackward;
  const ops::TensorView addend = l.in(B::addend);
  ops::layerNormBackward(l.rec, l.in(B::x), l.in(B::gamma), l.in(B::mean), l.in(B::rstd),
                         l.in(B::dy), l.out(B::dx), l.out(B::dgamma), l.out(B::dbeta),
                         l.out(B::scratch), l.write(B::dx), l.write(B::dgamma),
                         ops::LayerNormVariant::Auto, ops::LayerNormParamsVariant::Auto,
                         addend.buffer ? &addend : nullptr);
}

}  // namespace

Tensor Graph::layerNorm(Tensor x, Tensor gamma, Tensor beta, float eps) {
  check(x, "layerNorm");
  check(gamma, "layerNorm");
  check(beta, "layerNorm");
  for (Tensor t : {x, gamma, beta})
    if (tensor(t).dtype != DType::F32)
      throw ShapeError(describe("layerNorm", {x, gamma, beta}) + ": x, gamma and beta must be f32");
  const Shape sx = shape(x);  // a copy: output() may move tensors_
  const Shape stats = ops::layerNormStatsShape(sx, shape(gamma), shape(beta), eps);
  const int y = output(sx);
  const int mean = output(stats);
  const int rstd = output(stats);
  addNode(
      {OpKind::LayerNorm, {x.id, gamma.id, beta.id}, {y, mean, rstd}, {}, LayerNorm::Attrs{eps}});
  return {y};
}

namespace defs {
const OpDef kLayerNorm{.name = "layerNorm",
                       .inputs = LayerNorm::kInputs,
                       .outputs = LayerNorm::kOutputs,
                       .f32_outputs = (1u << LayerNorm::mean) | (1u << LayerNorm::rstd),
                       .backward = backward,
                       .launch = launch};
const OpDef kLayerNormBackward{.name = "layerNormBackward",
                               .inputs = LayerNormBackward::kInputs,
                               .outputs = LayerNormBackward::kOutputs,
                               .f32_outputs = 1u << LayerNormBackward::scratch,
                               .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
