#version 450
#extension GL_GOOGLE_include_directive : require
// SwiGLU, Llama's MLP gate: y = silu(gate) * up elementwise (swiglu.glsl's layout). Any float
// format for each tensor (common/storage.glsl), f32 arithmetic, one rounding as y is stored.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;

FLOATS(0, gate, readonly)  // (rows, gate_stride)
FLOATS(1, up, readonly)    // (rows, up_stride); the same buffer as gate for gate_up
FLOATS(2, y, writeonly)    // (rows, F)

#include "swiglu/swiglu.glsl"

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    const uint row = e / p.f, j = e - row * p.f;
    STORE(y, p.y_skip + e, silu(LOAD(gate, gateAt(row, j))) * LOAD(up, upAt(row, j)));
  }
}
