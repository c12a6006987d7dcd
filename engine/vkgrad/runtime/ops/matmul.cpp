// matmul: c = alpha·op(a)·op(b) [+ bias] (ops/matmul.h), and its backward: one node per
// input that needs a gradient, each one product of ops::matmulBackward (split along K into a
// scratch tensor where the product is a small C over a long K: a weight gradient), except
// that b's node also writes the bias's gradient when both need one: dbias sums the rows of
// the dc that b's product reads, and the Texel kernel sums them in the same dispatch. Where a
// is an activation's output that nothing else reads (an MLP's hidden layer), a's node writes
// the activation's input gradient instead, f' applied on the way out
// (runtime/ops/fused_activation.h). With a residual (Graph::matmulAdd) c = op(a)·op(b) + bias +
// residual, and the residual's gradient is dc itself (adopted where nothing else reads it, else
// added as add's rule does). With an applied activation (Graph::matmulActivation) c = f(z), z = a·b
// + bias, and z is the node's second output, pre: the rule starts from pre's gradient, which the
// reader of c wrote itself where it could fuse f' in (fused_activation.h), plus f's backward of c's
// gradient if c has one.
#include <optional>
#include <string>

#include "vkgrad/ops/matmul.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/fused_activation.h"

namespace vkgrad::graph {
namespace {

struct Matmul {
  enum In { a, b, bias, residual, kInputs };  // bias, residual: -1 when absent
  enum Out { c, pre, kOutputs };              // pre: -1 unless an activation is applied
  struct Attrs {
    bool trans_a = false, trans_b = false;
    float alpha = 1.0f;                  // scales op(a)·op(b), not the bias
    std::optional<ops::Activation> act;  // c = act(alpha·op(a)·op(b) + bias)
    float act_param = 0.0f;
  };
};

struct MatmulBackward {
  enum In { a, b, dc, act_x, kInputs };  // act_x: -1 unless an activation is fused in
  // scratch: -1 unless the product may split; bias_grad: -1 unless this is b's node and the
  // bias needs a gradient too.
  enum Out { grad, scratch, bias_grad, kOutputs };
  struct Attrs {
    Matmul::Attrs forward;
    Matmul::In of;  // the input whose gradient this node writes
    // With act_x: a = f(act_x), and this node writes act_x's gradient f'(act_x) ⊙ da.
    ops::Activation act = ops::Activation::GeluTanh;
    float act_param = 0.0f;
  };
};

ops::MatmulOptions options(const Matmul::Attrs& at) {
  ops::MatmulOptions o;
  o.trans_a = at.trans_a, o.trans_b = at.trans_b, o.alpha = at.alpha;
  return o;
}

// dA = dC·op(B)ᵀ, dB = op(A)ᵀ·dC, dbias = Σ rows dC (ops/matmul.h).
void backward(Backward& b, const Node& f) {
  const Matmul::Attrs& at = f.attr<Matmul::Attrs>();
  const int ia = f.inputs[Matmul::a], ib = f.inputs[Matmul::b];
  const bool joint = b.needs(f, Matmul::b) && b.needs(f, Matmul::bias);
  // The gradient of the product: dc, or with an applied activation pre's, which gets f's
  // backward of dc added where c has a gradient (its reader did not fuse f' in).
  int dz = -1;
  if (at.act) {
    const int c = f.outputs[Matmul::c], pre = f.outputs[Matmul::pre];
    if (b.hasGradient(c))
      emitActivationBackward(b, pre, c, b.dout(f, Matmul::c), *at.act, at.act_param);
    dz = b.dout(f, Matmul::pre);
  } else {
    dz = b.dout(f, Matmul::c);
  }
  if (b.needs(f, Matmul::residual)) {
    const int r = f.inputs[Matmul::residual];
    if (!b.adopt(r, dz)) b.addLater(dz, b.gradOf(r));
  }
  for (Matmul::In of : {Matmul::a, Matmul::b, Matmul::bias}) {
    if (!b.needs(f, of) || (of == Matmul::bias && joint)) continue;
    const int64_t floats =
        of == Matmul::bias
            ? 0
            : ops::matmulBackwardScratch(b.graph().tensor(ia).shape, b.graph().tensor(ib).shape,
                                         at.trans_a, at.trans_b, of == Matmul::a);
    const int scratch = floats > 0 ? b.temp({floats}, "matmul.scratch") : -1;
    int bias_grad = -1;
    ops::Write bias_write = ops::Write::Overwrite;
    if (of == Matmul::b && joint) {
      bias_grad = b.gradOf(f.inputs[Matmul::bias]);
      bias_write = b.contribute(bias_grad);
    }
    if (of == Matmul::a && !at.trans_a)
      if (const std::optional<FusedActivation> fused = fusedActivation(b, ia)) {
        b.emitTo(OpKind::MatmulBackward, fused->x, {ia, ib, dz, fused->x},
                 MatmulBackward::Attrs{at, of, fused->kind, fused->param}, {scratch, -1});
        continue;
      }
    b.emit(OpKind::MatmulBackward, f, of, {ia, ib, dz, -1}, MatmulBackward::Attrs{at, of},
           {scratch, bias_grad}, {ops::Write::Overwrite, bias_write});
  }
}

void launch(const Launch& l) {
  const ops::TensorView bias = l.in(Matmul::bias), residual = l.in(Matmul::residual);
  const ops::TensorView pre = l.out(Matmul::pre);
  const Matmul::Attrs& at = l.attr<Matmul::Attrs>();
  ops::MatmulOptions o = options(at);
  if (bias.buffer) o.bias = &bias;
  if (residual.buffer) o.residual = &residual;
  o.act = at.act, o.act_param = at.act_param;
  if (pre.buffer) o.act_pre = &pre;
  ops::matmul(l.rec, l.in(Matmul::a), l.in(Matmul::b), l.out(Matmul::c), o);
}

void launchBackward(const Launch& l) {
  const auto& at = l.attr<MatmulBackward::Attrs>();
  const ops::TensorView grad = l.out(MatmulBackward::grad);
  const ops::TensorView scratch = l.out(MatmulBackward::scratch);
  const ops::TensorView bias_grad = l.out(MatmulBackward::bias_grad);
  ops::MatmulGrads grads;
  (at.of == Matmul::a ? grads.da : at.of == Matmul::b ? grads.db : grads.dbias) = &grad;
  if (bias_grad.buffer) {
    grads.dbias = &bias_grad;
    grads.dbias_write = l.write(MatmulBackward::bias_grad);
  }
  const ops::TensorView act_x = l.in(MatmulBackward::act_x);
  if (act_x.buffer) {
    grads.da_act_x = &act_x;
    grads.da_act = at.act, grads.da_act_param = at.act_param;
  }
  ops::MatmulOptions o = options(at.forward);
  if (scratch.buffer) o.scratch = &scratch;
  ops::matmulBackward(l.rec, l.in(MatmulBackward::a), l.in(MatmulBackward::b),
                      l.in(MatmulBackward::dc), grads, o, l.write(MatmulBackward::grad));
}

}  // namespace

std::optional<FusedActivation> appliedActivationBackward(const Backward& b, const Node& node,
                                                         int y) {
  const auto& at = node.attr<Matmul::Attrs>();
  if (!at.act || y != node.outputs[Matmul::c]) return std::nullopt;
  const int pre = node.outputs[Matmul::pre];
  const bool rule_runs =
      b.needs(node, Matmul::a) || b.needs(node, Matmul::b) || b.needs(node, Matmul::bias);
  if (!ops::activationBackwardReadsX(*at.act) || b.uses(y) != 1 || b.hasGradient(y) || !rule_runs ||
      !b.wouldOverwrite(pre))
    return std::nullopt;
  return FusedActivation{pre, *at.act, at.act_param};
}

Tensor Graph::matmul(Tensor a, Tensor b, Tensor bias, bool trans_a, bool trans_b) {
  check(a, "matmul");
  check(b, "matmul");
  if (bias) check(bias, "matmul");
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32 ||
      (bias && tensor(bias).dtype != DType::F32))
    throw ShapeError(describe("matmul", {a, b, bias}) + ": operands must be f32");
  const Shape c =
      ops::matmulShape(shape(a), shape(b), trans_a, trans_b, bias ? &shape(bias) : nullptr);
  const int out = output(c);
  addNode({OpKind::Matmul,
           {a.id, b.id, bias ? bias.id : -1, -1},
           {out, -1},
           {},
           Matmul::Attrs{trans_a, trans_b, 1.0f}});
  return {out};
}

Tensor Graph::matmulAdd(Tensor a, Tensor b, Tensor bias, Tensor residual, bool trans_b) {
  for (Tensor t : {a, b, residual}) check(t, "matmulAdd");
  if (bias) check(bias, "matmulAdd");
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32 ||
      tensor(residual).dtype != DType::F32 || (bias && tensor(bias).dtype != DType::F32))
    throw ShapeError(describe("matmulAdd", {a, b, bias, residual}) + ": operands must be f32");
  const Shape c =
      ops::matmulShape(shape(a), shape(b), false, trans_b, bias ? &shape(bias) : nullptr);
  if (!(shape(residual) == c))
    throw ShapeError(describe("matmulAdd", {a, b, residual}) + ": the residual must be " + c.str());
  const int out = output(c);
  addNode({OpKind::Matmul,
           {a.id, b.id, bias ? bias.id : -1, residual.id},
           {out, -1},
           {},
           Matmul::Attrs{false, trans_b, 1.0f}});
  return {out};
}

Tensor Graph::matmulActivation(Tensor a, Tensor b, Tensor bias, ops::Activation kind, float param,
                               bool trans_b) {
  const std::string op = std::string("matmulActivation(") + ops::activationName(kind) + ")";
  check(a, op.c_str());
  check(b, op.c_str());
  if (bias) check(bias, op.c_str());
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32 ||
      (bias && tensor(bias).dtype != DType::F32))
    throw ShapeError(describe(op.c_str(), {a, b, bias}) + ": operands must be f32");
  const Shape c =
      ops::matmulShape(shape(a), shape(b), false, trans_b, bias ? &shape(bias) : nullptr);
  const int out = output(c), pre = output(c, DType::F32, true, "matmul.pre");
  Matmul::Attrs attrs{false, trans_b, 1.0f};
  attrs.act = kind, attrs.act_param = param;
  addNode({OpKind::Matmul, {a.id, b.id, bias ? bias.id : -1, -1}, {out, pre}, {}, attrs});
  return {out};
}

namespace defs {
const OpDef kMatmul{.name = "matmul",
                    .inputs = Matmul::kInputs,
                    .outputs = Matmul::kOutputs,
                    .backward = backward,
                    .backward_from_any_output = true,
                    .launch = launch};
const OpDef kMatmulBackward{.name = "matmulBackward",
                            .inputs = MatmulBackward::kInputs,
                            .outputs = MatmulBackward::kOutputs,
                            .f32_outputs = 1u << MatmulBackward::scratch,
                            .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
