// swiglu: silu(gate) * up (ops/swiglu.h), from two tensors or from one gate_up (..., 2F)
// with gate and up side by side; the backward writes both gradients in one node (into one
// (..., 2F) gradient for gate_up).
#include "vkgrad/ops/swiglu.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Swiglu {
  enum In { gate, up, kInputs };  // gate: gate_up for the fused form, up then -1
  enum Out { y, kOutputs };
};

struct SwigluBackward {
  enum In { gate, up, dy, kInputs };
  enum Out { dgate, dup, kOutputs };  // -1 when not wanted; dup always -1 for gate_up
};

void backward(Backward& b, const Node& f) {
  const int dy = b.dout(f, Swiglu::y);
  if (f.inputs[Swiglu::up] < 0) {  // gate_up: one gradient
    if (!b.needs(f, Swiglu::gate)) return;
    b.emit(OpKind::SwigluBackward, f, Swiglu::gate, {f.inputs[Swiglu::gate], -1, dy}, {}, {-1});
    return;
  }
  const int gate = f.inputs[Swiglu::gate], up = f.inputs[Swiglu::up];
  if (gate == up) {  // swiglu(x, x): two contributions to one gradient, one node each
    for (int in : {Swiglu::gate, Swiglu::up}) {
      if (!b.needs(f, in)) continue;
      const int gid = b.gradOf(gate);
      const ops::Write mode = b.contribute(gid);
      b.graph().addNode({OpKind::SwigluBackward,
                         {gate, up, dy},
                         {in == Swiglu::gate ? gid : -1, in == Swiglu::up ? gid : -1},
                         {mode, mode}});
    }
    return;
  }
  int grads[2] = {-1, -1};
  ops::Write modes[2] = {ops::Write::Overwrite, ops::Write::Overwrite};
  for (int in : {Swiglu::gate, Swiglu::up}) {
    if (!b.needs(f, in)) continue;
    grads[in] = b.gradOf(f.inputs[size_t(in)]);
    modes[in] = b.contribute(grads[in]);
  }
  if (grads[0] < 0 && grads[1] < 0) return;
  b.graph().addNode(
      {OpKind::SwigluBackward, {gate, up, dy}, {grads[0], grads[1]}, {modes[0], modes[1]}});
}

void launch(const Launch& l) {
  const ops::TensorView up = l.in(Swiglu::up);
  if (up.buffer)
    ops::swiglu(l.rec, l.in(Swiglu::gate), up, l.out(Swiglu::y));
  else
    ops::swiglu(l.rec, l.in(Swiglu::gate), l.out(Swiglu::y));
}

void launchBackward(const Launch& l) {
  using B = SwigluBackward;
  const ops::TensorView up = l.in(B::up);
  if (up.buffer)
    ops::swigluBackward(l.rec, l.in(B::gate), up, l.in(B::dy), l.out(B::dgate), l.out(B::dup),
                        l.write(B::dgate), l.write(B::dup));
  else
    ops::swigluBackward(l.rec, l.in(B::gate), l.in(B::dy), l.out(B::dgate), l.write(B::dgate));
}

}  // namespace

Tensor Graph::swiglu(Tensor gate, Tensor up) {
  check(gate, "swiglu");
  check(up, "swiglu");
  if (tensor(gate).dtype != DType::F32 || tensor(up).dtype != DType::F32)
    throw ShapeError(describe("swiglu", {gate, up}) + ": gate and up must be f32");
  if (!(shape(gate) == shape(up)))
    throw ShapeError(describe("swiglu", {gate, up}) + ": gate and up must have one shape");
  const int y = output(shape(gate));
  addNode({OpKind::Swiglu, {gate.id, up.id}, {y}, {}, {}});
  return {y};
}

Tensor Graph::swiglu(Tensor gate_up) {
  check(gate_up, "swiglu");
  if (tensor(gate_up).dtype != DType::F32)
    throw ShapeError(describe("swiglu", {gate_up}) + ": gate_up must be f32");
  const int y = output(ops::swigluFusedShape(shape(gate_up)));
  addNode({OpKind::Swiglu, {gate_up.id, -1}, {y}, {}, {}});
  return {y};
}

namespace defs {
const OpDef kSwiglu{.name = "swiglu",
                    .inputs = Swiglu::kInputs,
                    .outputs = Swiglu::kOutputs,
                    .backward = backward,
                    .launch = launch};
const OpDef kSwigluBackward{.name = "swigluBackward",
                            .inputs = SwigluBackward::kInputs,
                            .outputs = SwigluBackward::kOutputs,
                            .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
