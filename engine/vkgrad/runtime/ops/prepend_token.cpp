// prependToken: x (B,T,C) and a token (C) -> (B,T+1,C) with the token as row 0 of every
// batch (ops/prepend_token.h): a vision transformer's learned class token. Its backward writes
// dx (rows 1..) and dtoken (the sum of rows 0 over the batch) in one kernel.
#include "vkgrad/runtime/ops/prepend_token.h"

#include <utility>

#include "vkgrad/ops/prepend_token.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct PrependToken {
  enum In { x, token, kInputs };
  enum Out { y, kOutputs };
};

struct PrependTokenBackward {
  enum In { dy, kInputs };
  enum Out { dx, dtoken, kOutputs };  // either -1 when not wanted; each has its own write mode
};

void backward(Backward& b, const Node& f) {
  int grads[PrependToken::kInputs] = {-1, -1};
  ops::Write modes[PrependToken::kInputs] = {};
  for (int in : {PrependToken::x, PrependToken::token}) {
    if (!b.needs(f, in)) continue;
    grads[in] = b.gradOf(f.inputs[size_t(in)]);
    modes[in] = b.contribute(grads[in]);
  }
  if (grads[PrependToken::x] < 0 && grads[PrependToken::token] < 0) return;
  Node node{OpKind::PrependTokenBackward,
            {b.dout(f, PrependToken::y)},
            {grads[PrependToken::x], grads[PrependToken::token]},
            {modes[PrependToken::x], modes[PrependToken::token]}};
  b.graph().addNode(std::move(node));
}

void launch(const Launch& l) {
  ops::prependToken(l.rec, l.in(PrependToken::x), l.in(PrependToken::token),
                    l.out(PrependToken::y));
}

void launchBackward(const Launch& l) {
  using B = PrependTokenBackward;
  ops::prependTokenBackward(l.rec, l.in(B::dy), l.out(B::dx), l.out(B::dtoken), l.write(B::dx),
                            l.write(B::dtoken));
}

}  // namespace

Tensor prependToken(Graph& g, Tensor x, Tensor token) {
  g.check(x, "prependToken");
  g.check(token, "prependToken");
  if (g.tensor(x).dtype != DType::F32 || g.tensor(token).dtype != DType::F32)
    throw ShapeError(g.describe("prependToken", {x, token}) + ": x and token must be f32");
  const Shape out = ops::prependTokenShape(g.shape(x), g.shape(token));
  const int y = g.output(out);
  g.addNode({OpKind::PrependToken, {x.id, token.id}, {y}, {}, {}});
  return {y};
}

namespace defs {
const OpDef kPrependToken{.name = "prependToken",
                          .inputs = PrependToken::kInputs,
                          .outputs = PrependToken::kOutputs,
                          .backward = backward,
                          .launch = launch};
const OpDef kPrependTokenBackward{.name = "prependTokenBackward",
                                  .inputs = PrependTokenBackward::kInputs,
                                  .outputs = PrependTokenBackward::kOutputs,
                                  .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
