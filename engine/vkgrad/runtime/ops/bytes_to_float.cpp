// bytesToFloat: u8 data kept 4 bytes per u32 word (a gathered batch of images) widened to f32
// on the device, out = byte * scale + shift (ops/bytes_to_float.h). Not differentiable: its
// input is data.
#include "vkgrad/runtime/ops/bytes_to_float.h"

#include "vkgrad/ops/bytes_to_float.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct BytesToFloat {
  enum In { words, kInputs };  // u32, 4 bytes each
  enum Out { values, kOutputs };
  struct Attrs {
    float scale = 1.0f, shift = 0.0f;
  };
};

void launch(const Launch& l) {
  const auto& a = l.attr<BytesToFloat::Attrs>();
  ops::bytesToFloat(l.rec, l.in(BytesToFloat::words), l.out(BytesToFloat::values), a.scale,
                    a.shift);
}

}  // namespace

Tensor bytesToFloat(Graph& g, Tensor words, const Shape& out_shape, float scale, float shift) {
  g.check(words, "bytesToFloat");
  const Shape out = ops::bytesToFloatShape(g.shape(words), g.tensor(words).dtype, out_shape);
  const int y = g.output(out, DType::F32, false);
  g.addNode({OpKind::BytesToFloat, {words.id}, {y}, {}, BytesToFloat::Attrs{scale, shift}});
  return {y};
}

namespace defs {
const OpDef kBytesToFloat{.name = "bytesToFloat",
                          .inputs = BytesToFloat::kInputs,
                          .outputs = BytesToFloat::kOutputs,
                          .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
