#version 450
// out[b, 0, :] = token, out[b, 1 + t, :] = x[b, t, :]: one invocation per out element,
// grid-stride (the class token of a vision transformer, put in front of the patch rows).
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer X { float x[]; };          // (B,T,C)
layout(set = 0, binding = 1) readonly buffer Token { float token[]; };  // (C)
layout(set = 0, binding = 2) writeonly buffer Out { float out_rows[]; };  // (B,T+1,C)
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
    out_rows[p.skip[2] + i] = t == 0 ? token[p.skip[1] + c] : x[p.skip[0] + i - (b + 1) * p.dim];
  }
}
