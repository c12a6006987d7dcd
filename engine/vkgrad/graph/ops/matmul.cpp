// matmul: c = alpha·op(a)·op(b) [+ bias] (ops/matmul.h), and its backward: one node per
// input that needs a gradient, each one product of ops::matmulBackward (split along K into a
// scratch tensor where the product is a small C over a long K: a weight gradient), except
// that b's node also writes the bias's gradient when both need one: dbias sums the rows of
// the dc that b's product reads, and the Texel kernel sums them in the same dispatch. Where a
// is an activation's output that nothing else reads (an MLP's hidden layer), a's node writes
// the activation's input gradient instead, f' applied on the way out (graph/ops/fold.h).
// With a residual (Graph::matmulAdd) c = op(a)·op(b) + bias + residual, and the residual's
// gradient is dc itself (adopted where nothing else reads it, else added as add's rule does).
#include <string>

#include "vkgrad/graph/backward.h"
#include "vkgrad/graph/launch.h"
#include "vkgrad/graph/ops/defs.h"
#include "vkgrad/graph/ops/fold.h"
#include "vkgrad/ops/matmul.h"

namespace vkgrad::graph {
namespace {

struct Matmul {
  enum In { a, b, bias, residual, kInputs };  // bias, residual: -1 when absent
  enum Out { c, kOutputs };
  struct Attrs {
    bool trans_a = false, trans_b = false;
    float alpha = 1.0f;  // scales op(a)·op(b), not the bias
  };
};

struct MatmulBackward {
  enum In { a, b, dc, act_x, kInputs };  // act_x: -1 unless an activation is folded in
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
  if (b.needs(f, Matmul::residual)) {
    const int r = f.inputs[Matmul::residual], dc = b.dout(f, Matmul::c);
    if (!b.adopt(r, dc)) b.addLater(dc, b.gradOf(r));
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
    const int dc = b.dout(f, Matmul::c);
    if (of == Matmul::a && !at.trans_a)
      if (const std::optional<ActivationFold> fold = activationFold(b, ia)) {
        const int x = fold->node.inputs[0];
        b.emit(OpKind::MatmulBackward, fold->node, 0, {ia, ib, dc, x},
               MatmulBackward::Attrs{at, of, fold->kind, fold->param}, {scratch, -1});
        continue;
      }
    b.emit(OpKind::MatmulBackward, f, of, {ia, ib, dc, -1}, MatmulBackward::Attrs{at, of},
           {scratch, bias_grad}, {ops::Write::Overwrite, bias_write});
  }
}

void launch(const Launch& l) {
  const ops::TensorView bias = l.in(Matmul::bias), residual = l.in(Matmul::residual);
  ops::MatmulOptions o = options(l.attr<Matmul::Attrs>());
  if (bias.buffer) o.bias = &bias;
  if (residual.buffer) o.residual = &residual;
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
           {out},
           {},
           Matmul::Attrs{trans_a, trans_b, 1.0f}});
  return {out};
}

Tensor Graph::matmulAdd(Tensor a, Tensor b, Tensor bias, Tensor residual) {
  for (Tensor t : {a, b, residual}) check(t, "matmulAdd");
  if (bias) check(bias, "matmulAdd");
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32 ||
      tensor(residual).dtype != DType::F32 || (bias && tensor(bias).dtype != DType::F32))
    throw ShapeError(describe("matmulAdd", {a, b, bias, residual}) + ": operands must be f32");
  const Shape c = ops::matmulShape(shape(a), shape(b), false, false, bias ? &shape(bias) : nullptr);
  if (!(shape(residual) == c))
    throw ShapeError(describe("matmulAdd", {a, b, residual}) + ": the residual must be " + c.str());
  const int out = output(c);
  addNode({OpKind::Matmul,
           {a.id, b.id, bias ? bias.id : -1, residual.id},
           {out},
           {},
           Matmul::Attrs{false, false, 1.0f}});
  return {out};
}

namespace defs {
const OpDef kMatmul{.name = "matmul",
                    .inputs = Matmul::kInputs,
                    .outputs = Matmul::kOutputs,
                    .backward = backward,
                    .launch = launch};
const OpDef kMatmulBackward{.name = "matmulBackward",
                            .inputs = MatmulBackward::kInputs,
                            .outputs = MatmulBackward::kOutputs,
                            .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
