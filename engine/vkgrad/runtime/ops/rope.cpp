// rope: rotary position embedding of (B,T,H,D) rows (ops/rope.h), of every head or of the
// first heads only (ropeHeads, runtime/ops/rope.h). inv_freq is a constant of the graph (one
// per head size and theta, shared by every rope that uses them); the position offset, when
// given, is a (1) u32 tensor the kernel reads on the device. The backward turns the gradient
// back with the same kernel.
#include <cstring>
#include <vector>

#include "vkgrad/ops/rope.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/rope.h"

namespace vkgrad::graph {
namespace {

struct Rope {
  enum In { x, inv_freq, position, kInputs };  // position: -1 for offset 0
  enum Out { y, kOutputs };
  struct Attrs {
    int64_t rotated_heads = -1;  // heads [0, rotated) turn, the rest are copied; -1: all
  };
};

struct RopeBackward {
  enum In { dy, inv_freq, position, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = Rope::Attrs;
};

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Rope::x)) return;
  b.emit(OpKind::RopeBackward, f, Rope::x,
         {b.dout(f, Rope::y), f.inputs[Rope::inv_freq], f.inputs[Rope::position]},
         f.attr<Rope::Attrs>());
}

void launch(const Launch& l) {
  ops::rope(l.rec, l.in(Rope::x), l.in(Rope::inv_freq), l.in(Rope::position), l.out(Rope::y), false,
            ops::Write::Overwrite, l.attr<Rope::Attrs>().rotated_heads);
}

void launchBackward(const Launch& l) {
  using B = RopeBackward;
  ops::rope(l.rec, l.in(B::dy), l.in(B::inv_freq), l.in(B::position), l.out(B::dx),
            /*inverse=*/true, l.write(B::dx), l.attr<B::Attrs>().rotated_heads);
}

}  // namespace

Tensor ropeHeads(Graph& g, Tensor x, float theta, Tensor position, int64_t rotated_heads) {
  g.check(x, "rope");
  if (position) g.check(position, "rope");
  if (g.tensor(x).dtype != DType::F32)
    throw ShapeError(g.describe("rope", {x}) + ": x must be f32");
  if (position && g.tensor(position).dtype != DType::U32)
    throw ShapeError(g.describe("rope", {x, position}) + ": position must be u32");
  const Shape sx = g.shape(x);  // a copy: output() may move the tensors
  ops::ropeCheckShapes(sx, position ? &g.shape(position) : nullptr, rotated_heads);
  const int64_t d = sx.back();
  std::vector<float> inv_freq = ops::ropeInvFreq(d, theta);
  // One constant per table (head size and theta): every layer's q and k share it.
  const char* name = "rope.inv_freq";
  std::vector<uint32_t> words(inv_freq.size());
  std::memcpy(words.data(), inv_freq.data(), words.size() * 4);
  int table = -1;
  for (size_t t = 0; t < g.tensors().size() && table < 0; ++t) {
    const TensorInfo& info = g.tensor(int(t));
    if (info.kind == TensorKind::Constant && info.name == name && info.data == words)
      table = int(t);
  }
  if (table < 0) table = g.constant(name, {d / 2}, std::move(inv_freq)).id;
  const int y = g.output(sx);
  g.addNode({OpKind::Rope,
             {x.id, table, position ? position.id : -1},
             {y},
             {},
             Rope::Attrs{rotated_heads}});
  return {y};
}

Tensor Graph::rope(Tensor x, float theta, Tensor position) {
  return ropeHeads(*this, x, theta, position, -1);
}

namespace defs {
const OpDef kRope{.name = "rope",
                  .inputs = Rope::kInputs,
                  .outputs = Rope::kOutputs,
                  .in_place = Rope::x,
                  .backward = backward,
                  .launch = launch};
const OpDef kRopeBackward{.name = "ropeBackward",
                          .inputs = RopeBackward::kInputs,
                          .outputs = RopeBackward::kOutputs,
                          .in_place = RopeBackward::dy,
                          .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
