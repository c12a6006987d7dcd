#version 450
// out[b, 0, :] = token, out[b, 1 + t, :] = x[b, t, :]: one invocation per out element,
// grid-stride (the class token of a vision transformer, put in front of the patch rows).
// Every tensor in any float format (common/storage.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, x, readonly)          // (B,T,C)
FLOATS(1, token, readonly)      // (C)
FLOATS(2, out_rows, writeonly)  // (B,T+1,C)
layout(push_constant) uniform Push {
  uint n;        // B*(T+1)*C
  uint batch;    // B (unused here; the backward's)
  uint rows;     // T
  uint dim;      // C
  uint skip[3];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint r = i / p.dim, c = i - r * p.dim;  // row r of the (B*(T+1), C) output
    const uint b = r / (p.rows + 1), t = r - b * (p.rows + 1);
    // Row t >= 1 of batch b is x's row b*T + t - 1, i.e. element i - (b + 1)*C.
    STORE(out_rows, p.skip[2] + i,
          t == 0 ? LOAD(token, p.skip[1] + c) : LOAD(x, p.skip[0] + i - (b + 1) * p.dim));
  }
}
