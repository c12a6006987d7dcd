// prependToken: a learned token put in front of every sequence of a batch (the class token of
// a vision transformer), and its backward.
//
//   out[b, 0, :] = token,   out[b, 1 + t, :] = x[b, t, :]
//   dx[b, t, :] = dout[b, 1 + t, :],   dtoken = sum over b of dout[b, 0, :]
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): x (B,T,C), token (C) ->
// (B,T+1,C). Throws ShapeError "prependToken: x (2,4,8), token (7): token must be (C) = (8)".
Shape prependTokenShape(const Shape& x, const Shape& token);

// x: (B,T,C), token: (C), out: (B,T+1,C), each f32, f16 or bf16 (out rounds a wider input
// once, as it is stored); out must not overlap x or token.
void prependToken(vk::Recorder& rec, const TensorView& x, const TensorView& token,
                  const TensorView& out);

// dout: (B,T+1,C); dx: (B,T,C) and dtoken: (C), each (=|+=) under its own write mode, either
// one an empty view (no buffer) when not wanted. One dispatch: dtoken's sums over b run in a
// fixed order, one owner each, so the result is deterministic without atomics. Any float
// formats; the sums and accumulations are f32, rounded once as they are stored.
void prependTokenBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                          const TensorView& dtoken, Write dx_write = Write::Overwrite,
                          Write dtoken_write = Write::Overwrite);

}  // namespace vkgrad::ops
