// rmsNorm over the last axis (ops/rms_norm.h): y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2)
// + eps) saved per row for the backward, which writes dx and dgamma (each optional, each
// under its own write mode) in one node.
#include "vkgrad/ops/rms_norm.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct RmsNorm {
  enum In { x, gamma, kInputs };
  enum Out { y, rstd, kOutputs };  // rstd: (rows)
  struct Attrs {
    float eps = 1e-6f;
  };
};

struct RmsNormBackward {
  enum In { x, gamma, rstd, dy, kInputs };
  // dx, dgamma: -1 when not wanted; scratch: -1 unless dgamma is.
  enum Out { dx, dgamma, scratch, kOutputs };
};

void backward(Backward& b, const Node& f) {
  Graph& g = b.graph();
  const int x = f.inputs[RmsNorm::x];
  const Shape sx = g.tensor(x).shape;  // a copy: temp() adds tensors
  int grads[2] = {-1, -1};             // by forward input slot: x, gamma
  ops::Write modes[2] = {ops::Write::Overwrite, ops::Write::Overwrite};
  for (int in : {RmsNorm::x, RmsNorm::gamma}) {
    if (!b.needs(f, in)) continue;
    grads[in] = b.gradOf(f.inputs[size_t(in)]);
    modes[in] = b.contribute(grads[in]);
  }
  if (grads[RmsNorm::x] < 0 && grads[RmsNorm::gamma] < 0) return;
  const int scratch =
      grads[RmsNorm::gamma] >= 0
          ? b.temp({ops::rmsNormBackwardScratch(sx.rows(), sx.back())}, "rmsNorm.scratch")
          : -1;
  g.addNode({OpKind::RmsNormBackward,
             {x, f.inputs[RmsNorm::gamma], f.outputs[RmsNorm::rstd], b.dout(f, RmsNorm::y)},
             {grads[RmsNorm::x], grads[RmsNorm::gamma], scratch},
             {modes[RmsNorm::x], modes[RmsNorm::gamma], ops::Write::Overwrite}});
}

void launch(const Launch& l) {
  ops::rmsNorm(l.rec, l.in(RmsNorm::x), l.in(RmsNorm::gamma), l.out(RmsNorm::y),
               l.out(RmsNorm::rstd), l.attr<RmsNorm::Attrs>().eps);
}

void launchBackward(const Launch& l) {
  using B = RmsNormBackward;
  ops::rmsNormBackward(l.rec, l.in(B::x), l.in(B::gamma), l.in(B::rstd), l.in(B::dy), l.out(B::dx),
                       l.out(B::dgamma), l.out(B::scratch), l.write(B::dx), l.write(B::dgamma));
}

}  // namespace

Tensor Graph::rmsNorm(Tensor x, Tensor gamma, float eps) {
  check(x, "rmsNorm");
  check(gamma, "rmsNorm");
  for (Tensor t : {x, gamma})
    if (tensor(t).dtype != DType::F32)
      throw ShapeError(describe("rmsNorm", {x, gamma}) + ": x and gamma must be f32");
  const Shape sx = shape(x);  // a copy: output() may move tensors_
  const Shape stats = ops::rmsNormStatsShape(sx, shape(gamma), eps);
  const int y = output(sx);
  const int rstd = output(stats);
  addNode({OpKind::RmsNorm, {x.id, gamma.id}, {y, rstd}, {}, RmsNorm::Attrs{eps}});
  return {y};
}

namespace defs {
const OpDef kRmsNorm{.name = "rmsNorm",
                     .inputs = RmsNorm::kInputs,
                     .outputs = RmsNorm::kOutputs,
                     .f32_outputs = 1u << RmsNorm::rstd,
                     .backward = backward,
                     .launch = launch};
const OpDef kRmsNormBackward{.name = "rmsNormBackward",
                             .inputs = RmsNormBackward::kInputs,
                             .outputs = RmsNormBackward::kOutputs,
                             .f32_outputs = 1u << RmsNormBackward::scratch,
                             .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
