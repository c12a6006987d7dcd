#version 450
#extension GL_GOOGLE_include_directive : require
// SwiGLU backward (swiglu.glsl's layout): with s = sigmoid(gate),
//   dgate = dy * up * s * (1 + gate * (1 - s)),   dup = dy * silu(gate),
// each written or added (kAccumulateGate, kAccumulateUp) where wanted (kGate, kUp; an
// unwanted one's binding is a placeholder, never touched). For gate_up both bindings are one
// (rows, 2F) gradient, dup F elements further in. Any float format for each tensor.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kGate = true;
layout(constant_id = 2) const bool kUp = true;
layout(constant_id = 3) const bool kAccumulateGate = false;
layout(constant_id = 4) const bool kAccumulateUp = false;

FLOATS(0, gate, readonly)  // (rows, gate_stride)
FLOATS(1, up, readonly)    // (rows, up_stride)
FLOATS(2, dy, readonly)    // (rows, F)
// Not writeonly: the accumulating builds read them.
#ifdef FOUR_STORAGE_BUFFERS
// The ".sb4" build (a device that binds at most 4 storage buffers per stage): one output at
// binding 3, dgate's or dup's, whichever of kGate and kUp the host sets (a dispatch for each;
// no output may sit on an input, so their order does not matter).
FLOATS(3, dgate, )  // (rows, gate_stride) or (rows, up_stride)
#define dup dgate
#define dup_dtype dgate_dtype
#define dup_16 dgate_16
#else
FLOATS(3, dgate, )  // (rows, gate_stride)
FLOATS(4, dup, )    // (rows, up_stride)
#endif

#include "swiglu/swiglu.glsl"

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    const uint row = e / p.f, j = e - row * p.f;
    const float g = LOAD(gate, gateAt(row, j)), d = LOAD(dy, p.y_skip + e);
    // s_neg = 1 - s without cancellation, as activation's silu derivative.
    const float s = ewSigmoid(g), s_neg = ewSigmoid(-g);
    if (kGate) {
      const uint at = p.dgate_skip + row * p.gate_stride + j;
      float v = d * LOAD(up, upAt(row, j)) * s * (1.0 + g * s_neg);
      if (kAccumulateGate) v += LOAD(dgate, at);
      STORE(dgate, at, v);
    }
    if (kUp) {
      const uint at = p.dup_skip + row * p.up_stride + j;
      float v = d * g * s;
      if (kAccumulateUp) v += LOAD(dup, at);
      STORE(dup, at, v);
    }
  }
}
