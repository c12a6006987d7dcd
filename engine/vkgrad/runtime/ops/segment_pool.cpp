// segmentPool: node features pooled per graph of a block-diagonal batch (ops/segment_pool.h).
// Max keeps its argmax as a second (u32) output for the backward; Sum and Mean have none.
#include "vkgrad/runtime/ops/segment_pool.h"

#include "vkgrad/ops/segment_pool.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct SegmentPool {
  enum In { x, segments, kInputs };       // segments: (G + 1) u32 offsets
  enum Out { pooled, argmax, kOutputs };  // argmax: (G, F) u32, Max only (else absent)
  struct Attrs {
    ops::Pool kind = ops::Pool::Sum;
  };
};

struct SegmentPoolBackward {
  enum In { segments, argmax, dpooled, kInputs };  // argmax absent unless Max
  enum Out { dx, kOutputs };
  using Attrs = SegmentPool::Attrs;
};

void backward(Backward& b, const Node& f) {
  using S = SegmentPool;
  if (b.needs(f, S::x))
    b.emit(OpKind::SegmentPoolBackward, f, S::x,
           {f.inputs[S::segments], f.outputs[S::argmax], b.dout(f, S::pooled)}, f.attrs);
}

void launch(const Launch& l) {
  using S = SegmentPool;
  ops::segmentPool(l.rec, l.attr<S::Attrs>().kind, l.in(S::x), l.in(S::segments), l.out(S::pooled),
                   l.out(S::argmax));
}

void launchBackward(const Launch& l) {
  using B = SegmentPoolBackward;
  ops::segmentPoolBackward(l.rec, l.attr<B::Attrs>().kind, l.in(B::segments), l.in(B::argmax),
                           l.in(B::dpooled), l.out(B::dx), l.write(B::dx));
}

}  // namespace

Tensor segmentPool(Graph& g, Tensor x, Tensor segments, ops::Pool kind) {
  g.check(x, "segmentPool");
  g.check(segments, "segmentPool");
  const Shape out = ops::segmentPoolShape("segmentPool", g.shape(x), g.tensor(x).dtype,
                                          g.shape(segments), g.tensor(segments).dtype);
  const int pooled = g.output(out, DType::F32, g.tensor(x).differentiable);
  const int argmax =
      kind == ops::Pool::Max ? g.output(out, DType::U32, false, "segmentPool.argmax") : -1;
  g.addNode(
      {OpKind::SegmentPool, {x.id, segments.id}, {pooled, argmax}, {}, SegmentPool::Attrs{kind}});
  return {pooled};
}

namespace defs {
const OpDef kSegmentPool{.name = "segmentPool",
                         .inputs = SegmentPool::kInputs,
                         .outputs = SegmentPool::kOutputs,
                         .backward = backward,
                         .launch = launch};
const OpDef kSegmentPoolBackward{.name = "segmentPoolBackward",
                                 .inputs = SegmentPoolBackward::kInputs,
                                 .outputs = SegmentPoolBackward::kOutputs,
                                 .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
