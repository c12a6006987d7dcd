// mul: a * b elementwise with b broadcast over a (ops/elementwise.h), and its backward: da is
// dout * b, db is dout * a summed over b's broadcast axes. (The reparameterisation of a VAE,
// z = mu + sigma * eps, and gates are products.)
#include "vkgrad/runtime/backward.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Mul {
  enum In { a, b, kInputs };
  enum Out { product, kOutputs };
};

struct MulBackward {
  enum In { a, b, dout, kInputs };
  enum Out { grad, kOutputs };
  struct Attrs {
    Mul::In of;  // the input whose gradient this node writes
  };
};

void backward(Backward& b, const Node& f) {
  for (Mul::In of : {Mul::a, Mul::b})
    if (b.needs(f, of))
      b.emit(OpKind::MulBackward, f, of,
             {f.inputs[Mul::a], f.inputs[Mul::b], b.dout(f, Mul::product)}, MulBackward::Attrs{of});
}

void launch(const Launch& l) {
  ops::mul(l.rec, l.in(Mul::a), l.in(Mul::b), l.out(Mul::product));
}

void launchBackward(const Launch& l) {
  using B = MulBackward;
  const ops::Write w = l.write(B::grad);
  const ops::TensorView grad = l.out(B::grad), none{};
  const bool of_a = l.attr<B::Attrs>().of == Mul::a;
  ops::mulBackward(l.rec, l.in(B::a), l.in(B::b), l.in(B::dout), of_a ? grad : none,
                   of_a ? none : grad, w, w);
}

}  // namespace

Tensor Graph::mul(Tensor a, Tensor b) {
  return broadcastBinary(OpKind::Mul, a, b);
}

namespace defs {
const OpDef kMul{.name = "mul",
                 .inputs = Mul::kInputs,
                 .outputs = Mul::kOutputs,
                 .backward = backward,
                 .launch = launch};
const OpDef kMulBackward{.name = "mulBackward",
                         .inputs = MulBackward::kInputs,
                         .outputs = MulBackward::kOutputs,
                         .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
