// confusion: a classifier's (C,C) u32 confusion matrix counted on the device,
// counts[label][argmax of logits] (ops/confusion.h: ties, NaN rows, labels >= C), so an
// evaluation reads back C*C words. Not differentiable.
#include "vkgrad/runtime/ops/confusion.h"

#include "vkgrad/ops/confusion.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Confusion {
  enum In { logits, labels, kInputs };  // (..., C) f32, (...) u32
  enum Out { counts, kOutputs };        // (C,C) u32, [label][prediction]
};

void launch(const Launch& l) {
  ops::confusion(l.rec, l.in(Confusion::logits), l.in(Confusion::labels), l.out(Confusion::counts),
                 ops::Write::Overwrite);
}

}  // namespace

Tensor confusion(Graph& g, Tensor logits, Tensor labels) {
  g.check(logits, "confusion");
  g.check(labels, "confusion");
  const Shape counts = ops::confusionShape(g.shape(logits), g.tensor(logits).dtype, g.shape(labels),
                                           g.tensor(labels).dtype);
  const int y = g.output(counts, DType::U32, false);
  g.addNode({OpKind::Confusion, {logits.id, labels.id}, {y}});
  return {y};
}

namespace defs {
const OpDef kConfusion{.name = "confusion",
                       .inputs = Confusion::kInputs,
                       .outputs = Confusion::kOutputs,
                       .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
