// pad: constant or reflect padding of the last two axes (ops/pad.h), one dispatch; its
// backward gathers each element's copies back (deterministic, no atomics).
#include "vkgrad/ops/pad.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Pad {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
  using Attrs = ops::Padding;
};

struct PadBackward {
  enum In { dy, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = ops::Padding;
};

void backward(Backward& b, const Node& f) {
  if (b.needs(f, Pad::x))
    b.emit(OpKind::PadBackward, f, Pad::x, {b.dout(f, Pad::y)}, f.attr<Pad::Attrs>());
}

void launch(const Launch& l) {
  ops::pad(l.rec, l.in(Pad::x), l.out(Pad::y), l.attr<Pad::Attrs>());
}

void launchBackward(const Launch& l) {
  using B = PadBackward;
  ops::padBackward(l.rec, l.in(B::dy), l.out(B::dx), l.attr<B::Attrs>(), l.write(B::dx));
}

}  // namespace

Tensor Graph::pad(Tensor x, const ops::Padding& padding) {
  check(x, "pad");
  if (tensor(x).dtype != DType::F32) throw ShapeError(describe("pad", {x}) + ": x must be f32");
  const Shape out = ops::padShape(shape(x), padding);
  const int y = output(out);
  addNode({OpKind::Pad, {x.id}, {y}, {}, padding});
  return {y};
}

namespace defs {
const OpDef kPad{.name = "pad",
                 .inputs = Pad::kInputs,
                 .outputs = Pad::kOutputs,
                 .backward = backward,
                 .launch = launch};
const OpDef kPadBackward{.name = "padBackward",
                         .inputs = PadBackward::kInputs,
                         .outputs = PadBackward::kOutputs,
                         .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
