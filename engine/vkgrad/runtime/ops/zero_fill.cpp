// zeroFill: zeros a gradient that contributions may cover only in part (slices' gradients),
// before they accumulate into it. Added by autograd only (Backward::contribute).
#include <utility>

#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::graph {
namespace {

struct ZeroFill {
  enum In { kInputs };
  enum Out { zeros, kOutputs };
};

void launch(const Launch& l) {
  const ops::TensorView o = l.out(ZeroFill::zeros);
  // A root starts on the binding alignment and the planner gives it whole words (its last
  // two bytes, for a 16-bit tensor of odd length, are its own padding).
  l.rec.fill(*o.buffer, 0u, o.offset, (o.bytes() + 3) / 4 * 4);
}

}  // namespace

void Backward::zeroFill(int root) {
  g_.addNode({OpKind::ZeroFill, {}, {root}});
}

namespace defs {
const OpDef kZeroFill{.name = "zeroFill",
                      .inputs = ZeroFill::kInputs,
                      .outputs = ZeroFill::kOutputs,
                      .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
