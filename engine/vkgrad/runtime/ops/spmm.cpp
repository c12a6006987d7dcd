// spmm: y = A x over a SparseGraph (runtime/sparse.h, ops/spmm.h), optionally edge-weighted per
// head. Its backward: dx through the transpose's arrays (the same gather kernel, so no
// atomics) and dweights as one dot product per edge and head.
#include "vkgrad/runtime/ops/spmm.h"

#include <string>

#include "vkgrad/ops/spmm.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/sparse.h"

namespace vkgrad::graph {
namespace {

struct Spmm {
  enum In {
    offsets,
    sources,
    destinations,
    t_offsets,
    t_edges,
    t_destinations,
    x,
    weights,
    kInputs
  };
  enum Out { y, kOutputs };  // weights: -1 when absent (every weight 1)
};

struct SpmmBackward {
  // x: -1 for the gradient of x; weights: -1 for the gradient of the weights, or absent.
  enum In { sources, destinations, t_offsets, t_edges, t_destinations, x, weights, dy, kInputs };
  enum Out { grad, kOutputs };
  struct Attrs {
    Spmm::In of;  // x or weights
  };
};

void backward(Backward& b, const Node& f) {
  const int dy = b.dout(f, Spmm::y);
  const int arrays[] = {f.inputs[Spmm::sources], f.inputs[Spmm::destinations],
                        f.inputs[Spmm::t_offsets], f.inputs[Spmm::t_edges],
                        f.inputs[Spmm::t_destinations]};
  if (b.needs(f, Spmm::x))
    b.emit(OpKind::SpmmBackward, f, Spmm::x,
           {arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], -1, f.inputs[Spmm::weights], dy},
           SpmmBackward::Attrs{Spmm::x});
  if (b.needs(f, Spmm::weights))
    b.emit(OpKind::SpmmBackward, f, Spmm::weights,
           {arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], f.inputs[Spmm::x], -1, dy},
           SpmmBackward::Attrs{Spmm::weights});
}

void launch(const Launch& l) {
  ops::spmm(l.rec, l.in(Spmm::offsets), l.in(Spmm::sources), l.in(Spmm::weights), l.in(Spmm::x),
            l.out(Spmm::y));
}

void launchBackward(const Launch& l) {
  using B = SpmmBackward;
  if (l.attr<B::Attrs>().of == Spmm::x)
    ops::spmmTransposed(l.rec, l.in(B::t_offsets), l.in(B::t_edges), l.in(B::t_destinations),
                        l.in(B::weights), l.in(B::dy), l.out(B::grad), l.write(B::grad));
  else
    ops::spmmWeightsBackward(l.rec, l.in(B::sources), l.in(B::destinations), l.in(B::x),
                             l.in(B::dy), l.out(B::grad), l.write(B::grad));
}

}  // namespace

Tensor spmm(Graph& g, const SparseGraph& a, Tensor x, Tensor weights) {
  g.check(x, "spmm");
  if (weights) g.check(weights, "spmm");
  const std::string op = "spmm over graph " + a.name;
  if (g.tensor(x).dtype != DType::F32 || (weights && g.tensor(weights).dtype != DType::F32))
    throw ShapeError(g.describe(op.c_str(), {x, weights}) + ": x and weights must be f32");
  ops::spmmHeads(op.c_str(), a.nodes, a.edges, g.shape(x), weights ? &g.shape(weights) : nullptr);
  // Graph::dataset gives every op reading this SparseGraph the same tensors.
  const int offsets = g.dataset(a.offsets).id, sources = g.dataset(a.sources).id,
            destinations = g.dataset(a.destinations).id, t_offsets = g.dataset(a.t_offsets).id,
            t_edges = g.dataset(a.t_edges).id, t_destinations = g.dataset(a.t_destinations).id;
  const int y = g.output(g.shape(x));
  g.addNode({OpKind::Spmm,
             {offsets, sources, destinations, t_offsets, t_edges, t_destinations, x.id,
              weights ? weights.id : -1},
             {y},
             {},
             {}});
  return {y};
}

namespace defs {
const OpDef kSpmm{.name = "spmm",
                  .inputs = Spmm::kInputs,
                  .outputs = Spmm::kOutputs,
                  .backward = backward,
                  .launch = launch};
const OpDef kSpmmBackward{.name = "spmmBackward",
                          .inputs = SpmmBackward::kInputs,
                          .outputs = SpmmBackward::kOutputs,
                          .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
