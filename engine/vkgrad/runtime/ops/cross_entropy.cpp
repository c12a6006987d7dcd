// crossEntropy: the mean over rows of -log softmax(logits)[target] (ops/cross_entropy.h),
// with per-row losses and the row statistics the backward reads.
#include "vkgrad/ops/cross_entropy.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct CrossEntropy {
  enum In { logits, targets, status, kInputs };  // status: flags bad targets (2 u32)
  enum Out { mean, rows, saved, kOutputs };      // mean: (1); rows: per-row losses
};

struct CrossEntropyBackward {
  enum In { logits, targets, saved, dmean, kInputs };
  enum Out { dlogits, kOutputs };
};

void backward(Backward& b, const Node& f) {
  using F = CrossEntropy;
  if (b.needs(f, F::logits))
    b.emit(OpKind::CrossEntropyBackward, f, F::logits,
           {f.inputs[F::logits], f.inputs[F::targets], f.outputs[F::saved], b.dout(f, F::mean)},
           {});
}

void launch(const Launch& l) {
  using F = CrossEntropy;
  ops::crossEntropy(l.rec, l.in(F::logits), l.in(F::targets), l.out(F::rows), l.out(F::mean),
                    l.out(F::saved), l.in(F::status));
}

void launchBackward(const Launch& l) {
  using B = CrossEntropyBackward;
  ops::crossEntropyBackward(l.rec, l.in(B::logits), l.in(B::targets), l.in(B::saved),
                            l.in(B::dmean), l.out(B::dlogits), ops::kCrossEntropyNoIgnore,
                            l.write(B::dlogits));
}

}  // namespace

Tensor Graph::crossEntropy(Tensor logits, Tensor targets) {
  check(logits, "crossEntropy");
  check(targets, "crossEntropy");
  if (tensor(logits).dtype != DType::F32)
    throw ShapeError(describe("crossEntropy", {logits, targets}) + ": logits must be f32");
  const Shape sl = shape(logits);  // a copy: output() may move tensors_
  const Shape rows_shape = ops::crossEntropyShape(sl, shape(targets), tensor(targets).dtype);
  const int status = statusTensor("crossEntropy.status");
  const int mean = output({1});
  const int rows = output(rows_shape);
  const int saved = output({ops::crossEntropySavedSize(sl.rows())});
  addNode({OpKind::CrossEntropy, {logits.id, targets.id, status}, {mean, rows, saved}});
  return {mean};
}

namespace defs {
const OpDef kCrossEntropy{.name = "crossEntropy",
                          .inputs = CrossEntropy::kInputs,
                          .outputs = CrossEntropy::kOutputs,
                          .f32_outputs = (1u << CrossEntropy::mean) | (1u << CrossEntropy::rows) | (1u << CrossEntropy::saved),
                          .backward = backward,
                          .launch = launch};
const OpDef kCrossEntropyBackward{.name = "crossEntropyBackward",
                                  .inputs = CrossEntropyBackward::kInputs,
                                  .outputs = CrossEntropyBackward::kOutputs,
                                  .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
