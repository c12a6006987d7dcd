#version 450
// RMS norm backward, dgamma: column sums over rows, dgamma[c] = sum_r dy[r,c] * x[r,c] *
// rstd[r]. One invocation per column and block of p.block_rows rows (adjacent invocations
// take adjacent columns, adjacent in memory). A block's sum goes to out[skip + block * n + c]:
// with one block that is dgamma itself (= or += with kAccumulate), with several a scratch
// buffer that layer_norm/backward_reduce.comp (the same column sum over blocks) finishes. Sums
// run in row order, compensated: the same input gives the same bits, no atomics. Tensors in
// any float format (common/storage.glsl); the partials are f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

#include "common/kahan.glsl"

FLOATS(0, x, readonly)     // (rows, N)
FLOATS(1, dy, readonly)    // (rows, N)
FLOATS(2, rstd, readonly)  // (rows)
FLOATS(3, out_gamma, )     // (blocks, N); not writeonly: kAccumulate reads it
layout(push_constant) uniform Push {
  uint rows, n;
  uint block_rows;  // rows per block, >= 1
  uint blocks;      // ceil(rows / block_rows)
  uint x_skip, dy_skip, rstd_skip, out_skip;
} p;

void main() {
  // Grid-stride in both directions: the host caps the grid.
  const uint col_stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint block = gl_WorkGroupID.y; block < p.blocks; block += gl_NumWorkGroups.y) {
    const uint begin = block * p.block_rows;
    const uint end = min(p.rows, begin + p.block_rows);  // the last block may be short
    // c < n: the grid is rounded up to whole workgroups (no barriers in this shader).
    for (uint c = gl_GlobalInvocationID.x; c < p.n; c += col_stride) {
      Kahan s = kKahanZero;
      for (uint r = begin; r < end; ++r)
        s = kahanAdd(s, LOAD(dy, p.dy_skip + r * p.n + c) * LOAD(x, p.x_skip + r * p.n + c) *
                            LOAD(rstd, p.rstd_skip + r));
      const uint at = p.out_skip + block * p.n + c;
      float v = kahanValue(s);
      if (kAccumulate) v += LOAD(out_gamma, at);
      STORE(out_gamma, at, v);
    }
  }
}
