#version 450
// out[b, :] = x[b, index, :]: one invocation per out element, grid-stride (the class token's
// row of a vision transformer, read by its head). Either tensor in any float format
// (common/storage.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, x, readonly)          // (B,T,C)
FLOATS(1, out_rows, writeonly)  // (B,C)
layout(push_constant) uniform Push {
  uint n;        // invocations: B*C here, B*T*C or B*C in the backward
  uint rows;     // T
  uint dim;      // C
  uint index;    // the row taken, < T
  uint skip[2];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint b = i / p.dim, c = i - b * p.dim;
    STORE(out_rows, p.skip[1] + i, LOAD(x, p.skip[0] + (b * p.rows + p.index) * p.dim + c));
  }
}
