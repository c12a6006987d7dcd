// SwiGLU, the gate of Llama's MLP: y = silu(gate) * up elementwise, silu(g) = g * sigmoid(g).
// gate and up are two tensors of one shape, or one gate_up tensor (..., 2F) with gate in the
// first F of each row and up in the last F (gate_proj and up_proj as one matmul). Tensors
// in f32, f16 or bf16, each as its view says; f32 arithmetic, one rounding per store.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule of the fused form, Vulkan-free: gate_up (..., 2F), F >= 1 -> y (..., F).
// Throws ShapeError "swiglu: gate_up (4,7) needs an even last axis".
Shape swigluFusedShape(const Shape& gate_up);

// gate, up, y: one shape (..., F). y may be gate or up itself (same dtype).
void swiglu(vk::Recorder& rec, const TensorView& gate, const TensorView& up, const TensorView& y);
// gate_up: (..., 2F) -> y (..., F), not overlapping gate_up.
void swiglu(vk::Recorder& rec, const TensorView& gate_up, const TensorView& y);

// gate, up, dy: (..., F). dgate = dy * up * silu'(gate) and dup = dy * silu(gate), each
// written or added as its Write says; either may be an empty view (not computed). Outputs
// overlap nothing.
void swigluBackward(vk::Recorder& rec, const TensorView& gate, const TensorView& up,
                    const TensorView& dy, const TensorView& dgate, const TensorView& dup,
                    Write gate_write = Write::Overwrite, Write up_write = Write::Overwrite);
// gate_up: (..., 2F), dy: (..., F) -> dgate_up (..., 2F): dgate and dup side by side.
void swigluBackward(vk::Recorder& rec, const TensorView& gate_up, const TensorView& dy,
                    const TensorView& dgate_up, Write w = Write::Overwrite);

}  // namespace vkgrad::ops
