// runningTotal: total += x on every step, in place, for sums over many steps that the host
// reads once (a VAE's test loss over every batch of the test set). total is an Input tensor:
// persistent, zeroed by the host with Executor::setInput.
#include "vkgrad/runtime/graph.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct RunningTotal {
  enum In { x, total, kInputs };
  enum Out { kOutputs };
};

void launch(const Launch& l) {
  ops::scale(l.rec, l.in(RunningTotal::x), l.in(RunningTotal::total), 1.0f, ops::Write::Accumulate);
}

}  // namespace

void Graph::runningTotal(Tensor x, Tensor total) {
  check(x, "runningTotal");
  check(total, "runningTotal");
  const TensorInfo& t = tensor(total);
  if (t.kind != TensorKind::Input || t.root != total.id)
    throw ShapeError(describe("runningTotal", {x, total}) +
                     ": total must be an input tensor (the host zeroes it)");
  if (tensor(x).dtype != DType::F32 || t.dtype != DType::F32)
    throw ShapeError(describe("runningTotal", {x, total}) + ": x and total must be f32");
  if (!(shape(x) == t.shape))
    throw ShapeError(describe("runningTotal", {x, total}) + ": total must have the shape of x");
  addNode({OpKind::RunningTotal, {x.id, total.id}, {}, {}, {}});
}

namespace defs {
const OpDef kRunningTotal{.name = "runningTotal",
                          .inputs = RunningTotal::kInputs,
                          .outputs = RunningTotal::kOutputs,
                          .side_effects = true,
                          .launch = launch};
}  // namespace defs

}  // namespace vkgrad::graph
