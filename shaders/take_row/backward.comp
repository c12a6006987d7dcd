#version 450
// takeRow's backward. Overwrite: one invocation per dx element writes dy[b, :] into row
// `index` of each batch and 0 everywhere else, so dx needs no separate zeroing. Accumulate:
// one invocation per dy element adds it into row `index`, leaving the other rows as they
// are. Grid-stride; every dx element has one writer. Either tensor in any float format
// (common/storage.glsl); an accumulation adds in f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

FLOATS(0, dy, readonly)  // (B,C)
FLOATS(1, dx, )          // (B,T,C); read only to accumulate
layout(push_constant) uniform Push {
  uint n;        // invocations: B*T*C to overwrite, B*C to accumulate
  uint rows;     // T
  uint dim;      // C
  uint index;    // the row taken, < T
  uint skip[2];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    if (kAccumulate) {  // i walks dy (B,C)
      const uint b = i / p.dim, c = i - b * p.dim;
      const uint to = p.skip[1] + (b * p.rows + p.index) * p.dim + c;
      STORE(dx, to, LOAD(dx, to) + LOAD(dy, p.skip[0] + i));
    } else {  // i walks dx (B,T,C)
      const uint r = i / p.dim, c = i - r * p.dim;  // row r of (B*T, C)
      const uint b = r / p.rows, t = r - b * p.rows;
      STORE(dx, p.skip[1] + i, t == p.index ? LOAD(dy, p.skip[0] + b * p.dim + c) : 0.0);
    }
  }
}
