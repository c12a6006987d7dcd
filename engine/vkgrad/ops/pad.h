// Padding on the last two axes of a tensor of rank 1 to 4 (an image batch (N,C,H,W), a
// sequence (B,T,C) padded along T and C, a vector), each side by its own amount:
//
//   y (..., top + H + bottom, left + W + right)
//   Constant: y = x inside, `value` outside
//   Reflect:  outside mirrors about the edge, the edge itself not repeated (PyTorch's
//             "reflect": x = [a b c d], left 2 -> [c b a b c d]); each amount < its axis
//
// A rank-1 tensor pads its one axis (left, right; top and bottom 0). The backward gathers:
// each input element sums the outputs that copied it (Reflect: itself and up to two mirror
// images per axis, in a fixed order), so it is deterministic and needs no atomics. x, y, dy
// and dx may each be f32, f16 or bf16 (16-bit needs the device's 16-bit storage); the
// arithmetic is f32.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

enum class PadMode { Constant, Reflect };

struct Padding {
  int64_t top = 0, bottom = 0, left = 0, right = 0;  // elements added on each side, >= 0
  PadMode mode = PadMode::Constant;
  float value = 0.0f;  // Constant's fill
};

// The shape rule, Vulkan-free (the graph builder uses it too): x of rank 1 to 4, non-empty,
// amounts >= 0 (top and bottom 0 for rank 1), Reflect's amounts below their axis, y within
// 2^31 elements. Returns y's shape. Throws ShapeError
// "pad: x (2,3,4,4) with reflect (top 4, bottom 0, left 1, right 1): ...".
Shape padShape(const Shape& x, const Padding& padding);

// x: (..., H, W); y: padShape(x). y may not overlap x. ShapeError before recording anything.
void pad(vk::Recorder& rec, const TensorView& x, const TensorView& y, const Padding& padding);

// dy: padShape(x)'s shape; dx: like x, (=|+=) the sum of dy over the outputs each element
// reached. dx may not overlap dy.
void padBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx,
                 const Padding& padding, Write write = Write::Overwrite);

}  // namespace vkgrad::ops
