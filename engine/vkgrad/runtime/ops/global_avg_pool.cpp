// globalAvgPool: x (N,C,H,W) -> (N,C,1,1), the mean of each channel's plane: a convolutional
// network's head. No kernel of its own: x seen as (N,C,H*W) goes through ops/reduce.h's
// meanLastAxis (a fixed-order reduction, the same bits every run) and the backward through
// meanLastAxisBackward, which spreads dy / (H*W) over the plane.
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/ops/reduce.h"

namespace vkgrad::graph {
namespace {

struct GlobalAvgPool {
  enum In { x, kInputs };    // (N,C,H,W)
  enum Out { y, kOutputs };  // (N,C,1,1)
};

struct GlobalAvgPoolBackward {
  enum In { dy, kInputs };
  enum Out { dx, kOutputs };
};

// x's view as (N,C,H*W), y's as (N,C): the reduction's shapes, the same bytes.
ops::TensorView planes(ops::TensorView x) {
  x.shape = {x.shape[0], x.shape[1], x.shape[2] * x.shape[3]};
  return x;
}
ops::TensorView channels(ops::TensorView y) {
  y.shape = {y.shape[0], y.shape[1]};
  return y;
}

void backward(Backward& b, const Node& f) {
  if (b.needs(f, GlobalAvgPool::x))
    b.emit(OpKind::GlobalAvgPoolBackward, f, GlobalAvgPool::x, {b.dout(f, GlobalAvgPool::y)}, {});
}

void launch(const Launch& l) {
  ops::meanLastAxis(l.rec, planes(l.in(GlobalAvgPool::x)), channels(l.out(GlobalAvgPool::y)));
}

void launchBackward(const Launch& l) {
  using B = GlobalAvgPoolBackward;
  ops::meanLastAxisBackward(l.rec, channels(l.in(B::dy)), planes(l.out(B::dx)), l.write(B::dx));
}

}  // namespace

Tensor Graph::globalAvgPool(Tensor x) {
  check(x, "globalAvgPool");
  const Shape sx = shape(x);  // a copy: output() may move tensors_
  if (tensor(x).dtype != DType::F32 || sx.rank() != 4 || sx.numel() == 0)
    throw ShapeError(describe("globalAvgPool", {x}) + ": x must be a non-empty f32 (N,C,H,W)");
  const int y = output({sx[0], sx[1], 1, 1});
  addNode({OpKind::GlobalAvgPool, {x.id}, {y}, {}, {}});
  return {y};
}

namespace defs {
const OpDef kGlobalAvgPool{.name = "globalAvgPool",
                           .inputs = GlobalAvgPool::kInputs,
                           .outputs = GlobalAvgPool::kOutputs,
                           .backward = backward,
                           .launch = launch};
const OpDef kGlobalAvgPoolBackward{.name = "globalAvgPoolBackward",
                                   .inputs = GlobalAvgPoolBackward::kInputs,
                                   .outputs = GlobalAvgPoolBackward::kOutputs,
                                   .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
