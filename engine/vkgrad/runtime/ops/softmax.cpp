// softmax and logSoftmax on any axis: the row kernels (ops/softmax.h, ops/log_softmax.h) on
// the last axis, a transpose either side for another; and their backward, which reads the
// output: softmax's dx = y (dy - sum(dy y)), log-softmax's dx = dy - exp(y) sum(dy).
#include <numeric>
#include <vector>

#include "vkgrad/ops/log_softmax.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"

namespace vkgrad::graph {
namespace {

struct Softmax {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
};

struct SoftmaxBackward {
  enum In { y, dy, kInputs };
  enum Out { dx, kOutputs };
};

template <OpKind kBackward>
void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Softmax::x)) return;
  b.emit(kBackward, f, Softmax::x, {f.outputs[Softmax::y], b.dout(f, Softmax::y)}, {});
}

void launchSoftmax(const Launch& l) {
  ops::softmax(l.rec, l.in(Softmax::x), l.out(Softmax::y));
}
void launchSoftmaxBackward(const Launch& l) {
  ops::softmaxBackward(l.rec, l.in(SoftmaxBackward::y), l.in(SoftmaxBackward::dy),
                       l.out(SoftmaxBackward::dx), l.write(SoftmaxBackward::dx));
}
void launchLogSoftmax(const Launch& l) {
  ops::logSoftmax(l.rec, l.in(Softmax::x), l.out(Softmax::y));
}
void launchLogSoftmaxBackward(const Launch& l) {
  ops::logSoftmaxBackward(l.rec, l.in(SoftmaxBackward::y), l.in(SoftmaxBackward::dy),
                          l.out(SoftmaxBackward::dx), l.write(SoftmaxBackward::dx));
}

}  // namespace

Tensor Graph::rowwise(OpKind op, Tensor x, int axis) {
  const char* name = opName(op);
  check(x, name);
  if (!ops::isFloat(tensor(x).dtype)) throw ShapeError(describe(name, {x}) + ": x must be floats");
  const int rank = shape(x).rank();
  axis = normalizeAxis(name, shape(x), axis);
  if (axis != rank - 1) {  // the axis swapped with the last, the rows taken, swapped back
    std::vector<int> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(axis)], perm.back());
    return transpose(rowwise(op, transpose(x, perm), -1), perm);
  }
  const int y = output(shape(x));
  addNode({op, {x.id}, {y}});
  return {y};
}

Tensor Graph::softmax(Tensor x, int axis) {
  return rowwise(OpKind::Softmax, x, axis);
}

Tensor Graph::logSoftmax(Tensor x, int axis) {
  return rowwise(OpKind::LogSoftmax, x, axis);
}

namespace defs {
const OpDef kSoftmax{.name = "softmax",
                     .inputs = Softmax::kInputs,
                     .outputs = Softmax::kOutputs,
                     .in_place = Softmax::x,
                     .backward = backward<OpKind::SoftmaxBackward>,
                     .launch = launchSoftmax};
const OpDef kSoftmaxBackward{.name = "softmaxBackward",
                             .inputs = SoftmaxBackward::kInputs,
                             .outputs = SoftmaxBackward::kOutputs,
                             .in_place = SoftmaxBackward::dy,
                             .launch = launchSoftmaxBackward};
const OpDef kLogSoftmax{.name = "logSoftmax",
                        .inputs = Softmax::kInputs,
                        .outputs = Softmax::kOutputs,
                        .in_place = Softmax::x,
                        .backward = backward<OpKind::LogSoftmaxBackward>,
                        .launch = launchLogSoftmax};
const OpDef kLogSoftmaxBackward{.name = "logSoftmaxBackward",
                                .inputs = SoftmaxBackward::kInputs,
                                .outputs = SoftmaxBackward::kOutputs,
                                .in_place = SoftmaxBackward::dy,
                                .launch = launchLogSoftmaxBackward};
}  // namespace defs

}  // namespace vkgrad::graph
