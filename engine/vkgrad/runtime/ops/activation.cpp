// activation: y = f(x) elementwise (ops/activation.h), and its backward, which reads x or y,
// whichever the kind's derivative needs.
#include "vkgrad/ops/activation.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/fused_activation.h"

namespace vkgrad::graph {
namespace {

struct Activation {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
  struct Attrs {
    ops::Activation kind = ops::Activation::Relu;
    float param = 0.0f;  // ops/activation.h: the negative slope, alpha, ...
  };
};

struct ActivationBackward {
  enum In { saved, dy, kInputs };  // saved: x or y (ops::activationBackwardReadsX)
  enum Out { dx, kOutputs };
  using Attrs = Activation::Attrs;
};

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Activation::x)) return;
  const auto& at = f.attr<Activation::Attrs>();
  emitActivationBackward(b, f.inputs[Activation::x], f.outputs[Activation::y],
                         b.dout(f, Activation::y), at.kind, at.param);
}

void launch(const Launch& l) {
  const auto& at = l.attr<Activation::Attrs>();
  ops::activation(l.rec, at.kind, l.in(Activation::x), l.out(Activation::y), at.param);
}

void launchBackward(const Launch& l) {
  const auto& at = l.attr<ActivationBackward::Attrs>();
  const bool reads_x = ops::activationBackwardReadsX(at.kind);
  const ops::TensorView saved = l.in(ActivationBackward::saved), none{};
  ops::activationBackward(l.rec, at.kind, reads_x ? saved : none, reads_x ? none : saved,
                          l.in(ActivationBackward::dy), l.out(ActivationBackward::dx), at.param,
                          l.write(ActivationBackward::dx));
}

}  // namespace

std::optional<FusedActivation> fusedActivation(const Backward& b, int y) {
  const Graph& g = b.graph();
  const int p = g.producer(y);
  if (p < 0) return std::nullopt;
  const Node& node = g.nodes()[size_t(p)];
  if (node.op == OpKind::Matmul) return appliedActivationBackward(b, node, y);
  if (node.op != OpKind::Activation) return std::nullopt;
  const auto& at = node.attr<Activation::Attrs>();
  const int x = node.inputs[Activation::x];
  if (!ops::activationBackwardReadsX(at.kind) || b.uses(y) != 1 || b.hasGradient(y) ||
      !b.needs(node, Activation::x) || !b.wouldOverwrite(x))
    return std::nullopt;
  return FusedActivation{x, at.kind, at.param};
}

void emitActivationBackward(Backward& b, int x, int y, int dy, ops::Activation kind, float param) {
  const int saved = ops::activationBackwardReadsX(kind) ? x : y;
  b.emitTo(OpKind::ActivationBackward, x, {saved, dy}, ActivationBackward::Attrs{kind, param});
}

Tensor Graph::activation(Tensor x, ops::Activation kind, float param) {
  check(x, "activation");
  if (tensor(x).dtype != DType::F32)
    throw ShapeError(describe(ops::activationName(kind), {x}) + ": x must be f32");
  const int y = output(shape(x));
  addNode({OpKind::Activation, {x.id}, {y}, {}, Activation::Attrs{kind, param}});
  return {y};
}

namespace defs {
const OpDef kActivation{.name = "activation",
                        .inputs = Activation::kInputs,
                        .outputs = Activation::kOutputs,
                        .in_place = Activation::x,
                        .backward = backward,
                        .launch = launch};
const OpDef kActivationBackward{.name = "activationBackward",
                                .inputs = ActivationBackward::kInputs,
                                .outputs = ActivationBackward::kOutputs,
                                .in_place = ActivationBackward::dy,
                                .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
