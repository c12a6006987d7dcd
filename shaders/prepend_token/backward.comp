#version 450
// prependToken's backward in one dispatch: dx[b, t, :] (=|+=) dy[b, 1 + t, :], and
// dtoken[c] (=|+=) sum over b of dy[b, 0, c], summed in increasing b by invocation c alone:
// each sum has one owner and a fixed order, so it is deterministic without float atomics.
// One invocation per dx element, grid-stride. An output the caller does not want is switched
// off by a specialization constant (its binding then aliases the other output and is never
// touched); with dx off, the host launches only the C invocations that own the sums. Every
// tensor in any float format (common/storage.glsl); the sums and accumulations are f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kDx = true;
layout(constant_id = 2) const bool kDtoken = true;
layout(constant_id = 3) const bool kAccumulateDx = false;
layout(constant_id = 4) const bool kAccumulateDtoken = false;

FLOATS(0, dy, readonly)  // (B,T+1,C)
FLOATS(1, dx, )          // (B,T,C); read only to accumulate
FLOATS(2, dtoken, )      // (C); read only to accumulate
layout(push_constant) uniform Push {
  uint n;        // invocations: B*T*C (dx's elements), or C when dx is off
  uint batch;    // B
  uint rows;     // T
  uint dim;      // C
  uint skip[3];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  // dtoken first, outside the copy loop (inside it the sum slowed every element's step on
  // lavapipe): invocation c < C sums column c over the batch; the guard also skips the
  // invocations past C.
  if (kDtoken && gl_GlobalInvocationID.x < p.dim) {
    const uint c = gl_GlobalInvocationID.x;
    float sum = 0.0;
    for (uint k = 0; k < p.batch; ++k) sum += LOAD(dy, p.skip[0] + k * (p.rows + 1) * p.dim + c);
    const uint to = p.skip[2] + c;
    STORE(dtoken, to, kAccumulateDtoken ? LOAD(dtoken, to) + sum : sum);
  }
  if (!kDx) return;
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint r = i / p.dim, c = i - r * p.dim;  // row r of the (B*T, C) dx
    const uint b = r / p.rows;
    // dx's row r = b*T + t is dy's row r + b + 1.
    const float v = LOAD(dy, p.skip[0] + i + (b + 1) * p.dim);
    const uint to = p.skip[1] + i;
    STORE(dx, to, kAccumulateDx ? LOAD(dx, to) + v : v);
  }
}
