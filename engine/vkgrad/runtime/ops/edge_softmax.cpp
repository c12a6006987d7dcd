// edgeSoftmax: GAT's attention normalisation over a SparseGraph's incoming edges
// (ops/edge_softmax.h). The graph's offsets are its Dataset, read in place; the backward
// reads the forward's output alpha, not the scores.
#include "vkgrad/runtime/ops/edge_softmax.h"

#include "vkgrad/ops/edge_softmax.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/sparse.h"

namespace vkgrad::graph {
namespace {

struct EdgeSoftmax {
  enum In { scores, offsets, kInputs };  // offsets: the SparseGraph's (nodes + 1) u32
  enum Out { alpha, kOutputs };
};

struct EdgeSoftmaxBackward {
  enum In { alpha, dalpha, offsets, kInputs };
  enum Out { dscores, kOutputs };
};

void backward(Backward& b, const Node& f) {
  using E = EdgeSoftmax;
  if (b.needs(f, E::scores))
    b.emit(OpKind::EdgeSoftmaxBackward, f, E::scores,
           {f.outputs[E::alpha], b.dout(f, E::alpha), f.inputs[E::offsets]}, {});
}

void launch(const Launch& l) {
  using E = EdgeSoftmax;
  ops::edgeSoftmax(l.rec, l.in(E::offsets), l.in(E::scores), l.out(E::alpha));
}

void launchBackward(const Launch& l) {
  using B = EdgeSoftmaxBackward;
  ops::edgeSoftmaxBackward(l.rec, l.in(B::offsets), l.in(B::alpha), l.in(B::dalpha),
                           l.out(B::dscores), l.write(B::dscores));
}

}  // namespace

Tensor edgeSoftmax(Graph& g, const SparseGraph& a, Tensor scores) {
  g.check(scores, "edgeSoftmax");
  const Shape& s = g.shape(scores);
  if (s.rank() != 2 || s[0] != a.edges)
    throw ShapeError(g.describe("edgeSoftmax", {scores}) +
                     ": scores must be (edges, heads) for graph " + a.name + " (" +
                     std::to_string(a.nodes) + " nodes, " + std::to_string(a.edges) + " edges)");
  if (g.tensor(scores).dtype != DType::F32)
    throw ShapeError(g.describe("edgeSoftmax", {scores}) + ": scores must be f32");
  const Shape out = ops::edgeSoftmaxShape("edgeSoftmax", a.offsets.shape, a.offsets.dtype, s,
                                          g.tensor(scores).dtype);
  const Tensor offsets = g.dataset(a.offsets);  // shared by every op reading this graph
  const int alpha = g.output(out);
  g.addNode({OpKind::EdgeSoftmax, {scores.id, offsets.id}, {alpha}, {}, {}});
  return {alpha};
}

namespace defs {
const OpDef kEdgeSoftmax{.name = "edgeSoftmax",
                         .inputs = EdgeSoftmax::kInputs,
                         .outputs = EdgeSoftmax::kOutputs,
                         .backward = backward,
                         .launch = launch};
const OpDef kEdgeSoftmaxBackward{.name = "edgeSoftmaxBackward",
                                 .inputs = EdgeSoftmaxBackward::kInputs,
                                 .outputs = EdgeSoftmaxBackward::kOutputs,
                                 .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
