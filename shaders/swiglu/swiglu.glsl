// The push constants and indexing shared by swiglu/forward.comp and backward.comp: y (rows, F)
// from gate and up rows of F elements each, at their own row strides, so one gate_up tensor
// (rows, 2F) with gate and up side by side (one matmul for both) is the same kernel as two
// tensors: both bindings over it, up F elements further in.
#include "common/ew_math.glsl"

layout(push_constant) uniform Push {
  uint n;  // rows * F: elements of y
  uint f;  // F
  uint gate_stride, up_stride;  // elements from one row of gate (of up) to the next: F or 2F
  // First elements inside the bindings (ops/binding.h); up's includes its F for gate_up.
  // y_skip is y's in the forward, dy's in the backward.
  uint gate_skip, up_skip, y_skip, dgate_skip, dup_skip;
} p;

uint gateAt(uint row, uint j) { return p.gate_skip + row * p.gate_stride + j; }
uint upAt(uint row, uint j) { return p.up_skip + row * p.up_stride + j; }

// silu(g) = g * sigmoid(g), PyTorch's silu, with activation's sigmoid (no overflow).
float silu(float g) { return g * ewSigmoid(g); }
