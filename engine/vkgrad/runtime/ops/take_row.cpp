// takeRow: x (B,T,C) -> row `index` of every batch, (B,C) (ops/take_row.h): the class
// token's row that a vision transformer's head reads. Its backward writes dout into that row
// of dx and zeros elsewhere, or adds into the row when dx already holds a contribution.
#include "vkgrad/runtime/ops/take_row.h"

#include "vkgrad/ops/take_row.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct TakeRow {
  enum In { x, kInputs };
  enum Out { row, kOutputs };
  struct Attrs {
    int64_t index = 0;  // the row taken, 0 <= index < T
  };
};

struct TakeRowBackward {
  enum In { drow, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = TakeRow::Attrs;
};

void backward(Backward& b, const Node& f) {
  if (b.needs(f, TakeRow::x))
    b.emit(OpKind::TakeRowBackward, f, TakeRow::x, {b.dout(f, TakeRow::row)},
           f.attr<TakeRow::Attrs>());
}

void launch(const Launch& l) {
  ops::takeRow(l.rec, l.in(TakeRow::x), l.out(TakeRow::row), l.attr<TakeRow::Attrs>().index);
}

void launchBackward(const Launch& l) {
  using B = TakeRowBackward;
  ops::takeRowBackward(l.rec, l.in(B::drow), l.out(B::dx), l.attr<B::Attrs>().index,
                       l.write(B::dx));
}

}  // namespace

Tensor takeRow(Graph& g, Tensor x, int64_t index) {
  g.check(x, "takeRow");
  if (g.tensor(x).dtype != DType::F32)
    throw ShapeError(g.describe("takeRow", {x}) + ": x must be f32");
  const Shape out = ops::takeRowShape(g.shape(x), index);
  const int y = g.output(out);
  g.addNode({OpKind::TakeRow, {x.id}, {y}, {}, TakeRow::Attrs{index}});
  return {y};
}

namespace defs {
const OpDef kTakeRow{.name = "takeRow",
                     .inputs = TakeRow::kInputs,
                     .outputs = TakeRow::kOutputs,
                     .backward = backward,
                     .launch = launch};
const OpDef kTakeRowBackward{.name = "takeRowBackward",
                             .inputs = TakeRowBackward::kInputs,
                             .outputs = TakeRowBackward::kOutputs,
                             .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
