// add: a + b with b broadcast over a (ops/elementwise.h), and its backward: da is dout, db is
// dout summed over b's broadcast axes. AddBackward also adds a temporary into a gradient for
// rules whose kernels can only overwrite (Backward::addInto).
#include <utility>

#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/kept_axis.h"
#include "vkgrad/ops/map_reduce.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Add {
  enum In { a, b, kInputs };
  enum Out { sum, kOutputs };
};

struct AddBackward {
  enum In { dout, kInputs };
  enum Out { grad, kOutputs };
  struct Attrs {
    Add::In of;  // the input whose gradient this node writes
  };
};

// An operand that is used nowhere else and not broadcast takes dout itself as its gradient
// (Backward::adopt): a residual branch's output, say, needs no copy. One that is used
// elsewhere too gets dout added through Backward::addLater, which a later rule (layer norm's)
// may add in its own kernel: the residual stream's gradient, with no copy pass.
void backward(Backward& b, const Node& f) {
  const int dout = b.dout(f, Add::sum);
  const Graph& g = b.graph();
  for (Add::In of : {Add::a, Add::b}) {
    const int in = f.inputs[of];
    if (!b.needs(f, of) || b.adopt(in, dout)) continue;
    if (g.tensor(in).shape == g.tensor(dout).shape)
      b.addLater(dout, b.gradOf(in));
    else
      b.emit(OpKind::AddBackward, f, of, {dout}, AddBackward::Attrs{of});
  }
}

void launch(const Launch& l) {
  ops::add(l.rec, l.in(Add::a), l.in(Add::b), l.out(Add::sum));
}

void launchBackward(const Launch& l) {
  const ops::Write w = l.write(AddBackward::grad);
  const ops::TensorView none{};
  if (l.attr<AddBackward::Attrs>().of == Add::a)
    ops::addBackward(l.rec, l.in(AddBackward::dout), l.out(AddBackward::grad), none, w, w);
  else
    ops::addBackward(l.rec, l.in(AddBackward::dout), none, l.out(AddBackward::grad), w, w);
}

}  // namespace

Tensor Graph::add(Tensor a, Tensor b) {
  return broadcastBinary(OpKind::Add, a, b);
}

Tensor Graph::broadcastBinary(OpKind op, Tensor a, Tensor b) {
  const char* name = opName(op);
  check(a, name);
  check(b, name);
  if (tensor(a).dtype != DType::F32 || tensor(b).dtype != DType::F32)
    throw ShapeError(describe(name, {a, b}) + ": operands must be f32");
  // The kernels broadcast their second operand; the op commutes, so the larger goes first.
  if (shape(a).numel() < shape(b).numel()) std::swap(a, b);
  // Where b's kept axes are not adjacent, or both operands broadcast, the general kernel.
  if (ops::broadcastShape(name, shape(a), shape(b)) != shape(a) || !ops::broadcastsOver(shape(a), shape(b)))
    return binary(op == OpKind::Add ? ops::MapFn::Add : ops::MapFn::Mul, a, b);
  const int c = output(shape(a));
  addNode({op, {a.id, b.id}, {c}});
  return {c};
}

void Backward::addInto(int from, int gid, ops::Write mode) {
  Node add{OpKind::AddBackward, {from}, {gid}, {mode}, AddBackward::Attrs{Add::a}};
  g_.addNode(std::move(add));
}

namespace defs {
const OpDef kAdd{.name = "add",
                 .inputs = Add::kInputs,
                 .outputs = Add::kOutputs,
                 .in_place = Add::a,
                 .backward = backward,
                 .launch = launch};
const OpDef kAddBackward{.name = "addBackward",
                         .inputs = AddBackward::kInputs,
                         .outputs = AddBackward::kOutputs,
                         .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
