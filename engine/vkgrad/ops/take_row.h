// takeRow: one row of every sequence of a batch (the class token's row, which a vision
// transformer's head reads), and its backward.
//
//   out[b, :] = x[b, index, :]
//   dx[b, t, :] = (t == index ? dout[b, :] : 0)   (Overwrite), or dx[b, index, :] += dout[b, :]
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): x (B,T,C), 0 <= index < T ->
// (B,C). Throws ShapeError "takeRow: x (2,4,8) with index 4: index must be in [0, 4)".
Shape takeRowShape(const Shape& x, int64_t index);

// x: (B,T,C), out: (B,C), each f32, f16 or bf16 (out rounds a wider x once, as it is
// stored); out must not overlap x.
void takeRow(vk::Recorder& rec, const TensorView& x, const TensorView& out, int64_t index);

// dout: (B,C); dx: (B,T,C). Overwrite writes all of dx (zeros outside row index), so dx needs
// no zeroing first; Accumulate adds dout into row index (in f32, rounded once) and leaves the
// other rows alone. Any float formats, as in takeRow.
void takeRowBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx, int64_t index,
                     Write write = Write::Overwrite);

}  // namespace vkgrad::ops
