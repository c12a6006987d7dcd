// binary: a op b for add, sub, mul and div with numpy broadcasting on both sides (ops/
// map_reduce.h), and its backward: each operand's gradient is the sum, over the axes it was
// broadcast along, of dout times the partial derivative. add and mul whose second operand
// broadcasts one-sidedly keep their own nodes and fast kernels (add.cpp, mul.cpp).
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {
namespace {

struct Binary {
  enum In { a, b, kInputs };
  enum Out { result, kOutputs };
};

void backward(Backward& b, const Node& f) {
  using ops::MapFn;
  const auto& at = f.attr<MapReduceAttrs>();
  const int dout = b.dout(f, Binary::result);
  const int x = f.inputs[Binary::a], y = f.inputs[Binary::b];
  if (b.needs(f, Binary::a)) {
    switch (at.fn) {
      case MapFn::Mul:
        emitBroadcastGrad(b, f, Binary::a, at.space, MapFn::Mul, {dout, y});
        break;
      case MapFn::Div:
        emitBroadcastGrad(b, f, Binary::a, at.space, MapFn::Div, {dout, y});
        break;
      default:
        emitBroadcastGrad(b, f, Binary::a, at.space, MapFn::X, {dout});  // add, sub
    }
  }
  if (b.needs(f, Binary::b)) {
    switch (at.fn) {
      case MapFn::Mul:
        emitBroadcastGrad(b, f, Binary::b, at.space, MapFn::Mul, {dout, x});
        break;
      case MapFn::Div:
        emitBroadcastGrad(b, f, Binary::b, at.space, MapFn::DivGradB, {dout, x, y});
        break;
      case MapFn::Sub:
        emitBroadcastGrad(b, f, Binary::b, at.space, MapFn::X, {dout}, -1.0f);
        break;
      default:
        emitBroadcastGrad(b, f, Binary::b, at.space, MapFn::X, {dout});
    }
  }
}

}  // namespace

Tensor Graph::binary(ops::MapFn fn, Tensor a, Tensor b) {
  const char* name = ops::mapFnName(fn);
  check(a, name);
  check(b, name);
  if (fn != ops::MapFn::Add && fn != ops::MapFn::Sub && fn != ops::MapFn::Mul &&
      fn != ops::MapFn::Div)
    throw Error(std::string("graph: ") + name + " is not a binary op");
  if (!ops::isFloat(tensor(a).dtype) || !ops::isFloat(tensor(b).dtype))
    throw ShapeError(describe(name, {a, b}) + ": operands must be floats");
  const Shape space = ops::broadcastShape(name, shape(a), shape(b));  // ShapeError naming both
  const int c = output(space);
  addNode({OpKind::Binary, {a.id, b.id}, {c}, {}, MapReduceAttrs{fn, ops::Fold::Sum, space}});
  return {c};
}

Tensor Graph::sub(Tensor a, Tensor b) {
  return binary(ops::MapFn::Sub, a, b);
}

Tensor Graph::div(Tensor a, Tensor b) {
  return binary(ops::MapFn::Div, a, b);
}

namespace defs {
const OpDef kBinary{.name = "binary",
                    .inputs = Binary::kInputs,
                    .outputs = Binary::kOutputs,
                    .backward = backward,
                    .launch = launchMapReduce};
}  // namespace defs

}  // namespace vkgrad::graph
