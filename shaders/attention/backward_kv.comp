#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward, dK and dV: a workgroup owns TILE key rows of one (batch,
// key/value head), one invocation per key holding k, v and their gradients; query tiles (q,
// dO, LSE, rowdot) pass through shared memory. P is recomputed from q, k and LSE:
//   P_ij = exp(scale q_i·k_j - LSE_i),  dV_j += P_ij dO_i,
//   dS_ij = P_ij (dO_i·v_j - rowdot_i),  dK_j += scale dS_ij q_i,
// summed over the queries of every query head that reads this key/value head (the group's,
// grouped-query attention), head after head. Each key's sums run over heads and queries in
// order in one invocation: deterministic, no atomics.
// Query tiles before the first query that sees the workgroup's first key are not visited.
// Every tensor in any float format (LSE and the row dots too); the arithmetic is f32.
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"
#include "attention/common.glsl"

// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads q, dout, lse and rowdot
// through one-component texel views (FLOATS_OR_TEXELS).
FLOATS_OR_TEXELS(0, q)
FLOATS(1, k, readonly)
FLOATS(2, v, readonly)
FLOATS_OR_TEXELS(3, dout)
FLOATS_OR_TEXELS(4, lse)
FLOATS_OR_TEXELS(5, rowdot)
FLOATS(6, dk, )  // not writeonly: accumulate reads them
FLOATS(7, dv, )

shared float qs[TILE][D];
shared float dos[TILE][D];
shared float ls[TILE];
shared float rs[TILE];

void main() {
  const uint b = gl_WorkGroupID.z, hk = gl_WorkGroupID.y;  // a key/value head
  const uint j0 = gl_WorkGroupID.x * TILE, j = j0 + gl_LocalInvocationID.x;
  const bool key = j < p.Tk;

  float kj[D], vj[D], gk[D], gv[D];
  for (uint d = 0; d < D; ++d) {
    kj[d] = key ? LOAD(k, at(K, b, j, p.Tk, hk) + d) : 0.0;
    vj[d] = key ? LOAD(v, at(V, b, j, p.Tk, hk) + d) : 0.0;
    gk[d] = 0.0;
    gv[d] = 0.0;
  }
  const uint first = key ? queryBegin(j) : p.Tq;
  const uint tile_begin = queryBegin(j0) / TILE * TILE;

  for (uint h = hk * p.group; h < (hk + 1) * p.group; ++h)
  for (uint i0 = tile_begin; i0 < p.Tq; i0 += TILE) {
    barrier();  // the previous tile is no longer read
    for (uint e = gl_LocalInvocationID.x; e < TILE * D; e += TILE) {
      const uint r = e / D, d = e % D, i = i0 + r;
      qs[r][d] = i < p.Tq ? LOAD_OR_FETCH(q, at(Q, b, i, p.Tq, h) + d) : 0.0;
      dos[r][d] = i < p.Tq ? LOAD_OR_FETCH(dout, at(DO, b, i, p.Tq, h) + d) : 0.0;
    }
    {
      const uint i = i0 + gl_LocalInvocationID.x;
      ls[gl_LocalInvocationID.x] = i < p.Tq ? LOAD_OR_FETCH(lse, p.lse_skip + rowIndex(b, h, i)) : NEG_INF;
      rs[gl_LocalInvocationID.x] = i < p.Tq ? LOAD_OR_FETCH(rowdot, p.rowdot_skip + rowIndex(b, h, i)) : 0.0;
    }
    barrier();
    for (uint r = 0; r < TILE; ++r) {
      // Masked pairs and rows that see no key (LSE = -inf) contribute nothing.
      if (i0 + r < first || ls[r] == NEG_INF) continue;
      float s = 0.0, dp = 0.0;
      for (uint d = 0; d < D; ++d) {
        s += qs[r][d] * kj[d];
        dp += dos[r][d] * vj[d];
      }
      const float pr = exp(s * p.scale - ls[r]);
      const float ds = pr * (dp - rs[r]);
      for (uint d = 0; d < D; ++d) {
        gv[d] += pr * dos[r][d];
        gk[d] += ds * qs[r][d];
      }
    }
  }
  if (!key) return;
  const uint ki = at(DK, b, j, p.Tk, hk), vi = at(DV, b, j, p.Tk, hk);
  for (uint d = 0; d < D; ++d) {
    const float gkd = gk[d] * p.scale;
    STORE(dk, ki + d, p.accumulate != 0 ? LOAD(dk, ki + d) + gkd : gkd);
    STORE(dv, vi + d, p.accumulate != 0 ? LOAD(dv, vi + d) + gv[d] : gv[d]);
  }
}
