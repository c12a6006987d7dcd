// rope: rotary position embedding of (B,T,H,D) rows (ops/rope.h). inv_freq is a constant of
// the graph (one per head size and theta, shared by every rope that uses them); the position
// offset, when given, is a (1) u32 tensor the kernel reads on the device. The backward turns
// the gradient back with the same kernel.
#include <cstring>
#include <vector>

#include "vkgrad/ops/rope.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Rope {
  enum In { x, inv_freq, position, kInputs };  // position: -1 for offset 0
  enum Out { y, kOutputs };
};

struct RopeBackward {
  enum In { dy, inv_freq, position, kInputs };
  enum Out { dx, kOutputs };
};

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Rope::x)) return;
  b.emit(OpKind::RopeBackward, f, Rope::x,
         {b.dout(f, Rope::y), f.inputs[Rope::inv_freq], f.inputs[Rope::position]}, {});
}

void launch(const Launch& l) {
  ops::rope(l.rec, l.in(Rope::x), l.in(Rope::inv_freq), l.in(Rope::position), l.out(Rope::y));
}

void launchBackward(const Launch& l) {
  using B = RopeBackward;
  ops::rope(l.rec, l.in(B::dy), l.in(B::inv_freq), l.in(B::position), l.out(B::dx),
            /*inverse=*/true, l.write(B::dx));
}

}  // namespace

Tensor Graph::rope(Tensor x, float theta, Tensor position) {
  check(x, "rope");
  if (position) check(position, "rope");
  if (tensor(x).dtype != DType::F32) throw ShapeError(describe("rope", {x}) + ": x must be f32");
  if (position && tensor(position).dtype != DType::U32)
    throw ShapeError(describe("rope", {x, position}) + ": position must be u32");
  const Shape sx = shape(x);  // a copy: output() may move tensors_
  ops::ropeCheckShapes(sx, position ? &shape(position) : nullptr);
  const int64_t d = sx.back();
  std::vector<float> inv_freq = ops::ropeInvFreq(d, theta);
  // One constant per table (head size and theta): every layer's q and k share it.
  const char* name = "rope.inv_freq";
  std::vector<uint32_t> words(inv_freq.size());
  std::memcpy(words.data(), inv_freq.data(), words.size() * 4);
  int table = -1;
  for (size_t t = 0; t < tensors_.size() && table < 0; ++t)
    if (tensors_[t].kind == TensorKind::Constant && tensors_[t].name == name &&
        tensors_[t].data == words)
      table = int(t);
  if (table < 0) table = constant(name, {d / 2}, std::move(inv_freq)).id;
  const int y = output(sx);
  addNode({OpKind::Rope, {x.id, table, position ? position.id : -1}, {y}, {}, {}});
  return {y};
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
