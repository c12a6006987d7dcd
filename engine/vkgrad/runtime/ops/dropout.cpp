// dropout: inverted dropout from the graph's on-device generator (ops/random.h). The mask is
// never stored: the backward recomputes it from the same generator state and stream.
#include <string>

#include "vkgrad/ops/random.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Dropout {
  enum In { x, rng, kInputs };  // rng: the generator's state (Graph::rngState)
  enum Out { y, kOutputs };
  struct Attrs {
    float p = 0.0f;       // drop probability, in [0, 1)
    uint32_t stream = 0;  // the generator's stream, one per call site
  };
};

struct DropoutBackward {
  enum In { dy, rng, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = Dropout::Attrs;
};

void backward(Backward& b, const Node& f) {
  if (b.needs(f, Dropout::x))
    b.emit(OpKind::DropoutBackward, f, Dropout::x, {b.dout(f, Dropout::y), f.inputs[Dropout::rng]},
           f.attrs);
}

void launch(const Launch& l) {
  const auto& at = l.attr<Dropout::Attrs>();
  ops::dropout(l.rec, l.in(Dropout::x), l.out(Dropout::y), at.p, l.in(Dropout::rng), at.stream);
}

void launchBackward(const Launch& l) {
  using B = DropoutBackward;
  const auto& at = l.attr<B::Attrs>();
  ops::dropoutBackward(l.rec, l.in(B::dy), l.out(B::dx), at.p, l.in(B::rng), at.stream,
                       l.write(B::dx));
}

}  // namespace

Tensor Graph::dropout(Tensor x, float p) {
  check(x, "dropout");
  if (tensor(x).dtype != DType::F32) throw ShapeError(describe("dropout", {x}) + ": x must be f32");
  if (!(p >= 0.0f && p < 1.0f))
    throw ShapeError(describe("dropout", {x}) + ": p must be in [0, 1), got " + std::to_string(p));
  if (p == 0.0f || !training_) return x;
  const int y = output(shape(x));
  addNode({OpKind::Dropout, {x.id, generator()}, {y}, {}, Dropout::Attrs{p, streams_++}});
  return {y};
}

namespace defs {
const OpDef kDropout{.name = "dropout",
                     .inputs = Dropout::kInputs,
                     .outputs = Dropout::kOutputs,
                     .backward = backward,
                     .launch = launch};
const OpDef kDropoutBackward{.name = "dropoutBackward",
                             .inputs = DropoutBackward::kInputs,
                             .outputs = DropoutBackward::kOutputs,
                             .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
