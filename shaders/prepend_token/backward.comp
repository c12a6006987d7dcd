#version 450
// prependToken's backward in one dispatch: dx[b, t, :] (=|+=) dy[b, 1 + t, :], and
// dtoken[c] (=|+=) sum over b of dy[b, 0, c], summed in increasing b by invocation c alone:
// each sum has one owner and a fixed order, so it is deterministic without float atomics.
// One invocation per dx element, grid-stride. An output the caller does not want is switched
// off by a specialization constant (its binding then aliases the other output and is never
// touched); with dx off, the host launches only the C invocations that own the sums.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kDx = true;
layout(constant_id = 2) const bool kDtoken = true;
layout(constant_id = 3) const bool kAccumulateDx = false;
layout(constant_id = 4) const bool kAccumulateDtoken = false;

layout(set = 0, binding = 0) readonly buffer Dy { float dy[]; };  // (B,T+1,C)
layout(set = 0, binding = 1) buffer Dx { float dx[]; };           // (B,T,C); read only to accumulate
layout(set = 0, binding = 2) buffer Dtoken { float dtoken[]; };   // (C); read only to accumulate
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
    for (uint k = 0; k < p.batch; ++k) sum += dy[p.skip[0] + k * (p.rows + 1) * p.dim + c];
    if (kAccumulateDtoken) dtoken[p.skip[2] + c] += sum;
    else dtoken[p.skip[2] + c] = sum;
  }
  if (!kDx) return;
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint r = i / p.dim, c = i - r * p.dim;  // row r of the (B*T, C) dx
    const uint b = r / p.rows;
    // dx's row r = b*T + t is dy's row r + b + 1.
    const uint from = p.skip[0] + i + (b + 1) * p.dim;
    if (kAccumulateDx) dx[p.skip[1] + i] += dy[from];
    else dx[p.skip[1] + i] = dy[from];
  }
}
