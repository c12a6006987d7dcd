#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward, dQ: a workgroup owns TILE query rows of one (batch, head), one
// invocation per row holding q, dO and dQ; key and value tiles pass through shared memory.
//   P_ij = exp(scale q_i·k_j - LSE_i),  dS_ij = P_ij (dO_i·v_j - rowdot_i),
//   dQ_i = scale sum_j dS_ij k_j.
// Key tiles past the last one any row of the workgroup sees (causal) are not visited. Every
// tensor in any float format (LSE and the row dots too); the arithmetic is f32.
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"
#include "attention/common.glsl"

// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads q, lse and rowdot
// through one-component texel views (FLOATS_OR_TEXELS).
FLOATS_OR_TEXELS(0, q)
FLOATS(1, k, readonly)
FLOATS(2, v, readonly)
FLOATS(3, dout, readonly)
FLOATS_OR_TEXELS(4, lse)
FLOATS_OR_TEXELS(5, rowdot)
FLOATS(6, dq, )  // not writeonly: accumulate reads it

shared float ks[TILE][D];
shared float vs[TILE][D];

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, hk = kvHead(h);
  const uint i0 = gl_WorkGroupID.x * TILE, i = i0 + gl_LocalInvocationID.x;
  const bool row = i < p.Tq;

  float qi[D], doi[D], g[D];
  for (uint d = 0; d < D; ++d) {
    qi[d] = row ? LOAD_OR_FETCH(q, at(Q, b, i, p.Tq, h) + d) : 0.0;
    doi[d] = row ? LOAD(dout, at(DO, b, i, p.Tq, h) + d) : 0.0;
    g[d] = 0.0;
  }
  const float l = row ? LOAD_OR_FETCH(lse, p.lse_skip + rowIndex(b, h, i)) : NEG_INF;
  const float rd = row ? LOAD_OR_FETCH(rowdot, p.rowdot_skip + rowIndex(b, h, i)) : 0.0;
  // A row that sees no key has LSE = -inf and a zero gradient.
  const uint end = l == NEG_INF ? 0 : keyEnd(i);
  const uint tile_end = keyEnd(min(i0 + TILE, p.Tq) - 1);

  for (uint j0 = 0; j0 < tile_end; j0 += TILE) {
    barrier();  // the previous tile is no longer read
    for (uint e = gl_LocalInvocationID.x; e < TILE * D; e += TILE) {
      const uint r = e / D, d = e % D, j = j0 + r;
      ks[r][d] = j < p.Tk ? LOAD(k, at(K, b, j, p.Tk, hk) + d) : 0.0;
      vs[r][d] = j < p.Tk ? LOAD(v, at(V, b, j, p.Tk, hk) + d) : 0.0;
    }
    barrier();
    const uint n = j0 < end ? min(TILE, end - j0) : 0;
    for (uint r = 0; r < n; ++r) {
      float s = 0.0, dp = 0.0;
      for (uint d = 0; d < D; ++d) {
        s += qi[d] * ks[r][d];
        dp += doi[d] * vs[r][d];
      }
      const float ds = exp(s * p.scale - l) * (dp - rd);
      for (uint d = 0; d < D; ++d) g[d] += ds * ks[r][d];
    }
  }
  if (!row) return;
  const uint qi_at = at(DQ, b, i, p.Tq, h);
  for (uint d = 0; d < D; ++d) {
    const float gd = g[d] * p.scale;
    STORE(dq, qi_at + d, p.accumulate != 0 ? LOAD(dq, qi_at + d) + gd : gd);
  }
}
