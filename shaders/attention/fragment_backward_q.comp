#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward on fragments, dQ (after attention/backward_rowdot.comp has written
// each row's dO·O): as attention/backward_q.comp,
//   P_ij = exp(scale q_i·k_j - LSE_i),  dS_ij = P_ij (dO_i·v_j - rowdot_i),
//   dQ_i = scale sum_j dS_ij k_j,
// with S = Q·Kᵀ, dP = dO·Vᵀ and dQ += dS·K as 16x16x16 fp16 products summed in fp32. Q, K, V
// and dO are rounded to fp16 on their way into shared memory, and so is dS before dS·K;
// P and dS themselves are fp32.
//
// A workgroup owns R = 16·WARPS query rows (attention/fragment_tiles.glsl); warp w keeps its
// 16 rows of Q and dO as fragments and its 16 x D of dQ as accumulators. Per key tile, S and
// dP go to the warp's blocks of Ss and DPs, where lane r (< 16) reads row r and writes the
// row's dS as fp16. Key tiles no row of the workgroup sees (causal) are skipped.
#include "common/storage.glsl"
#include "attention/common.glsl"

layout(constant_id = 2) const uint WARPS = 2;  // warps per workgroup
layout(constant_id = 3) const uint SG = 32;    // lanes of a warp (TILE = WARPS·SG)

#define FRAG_WARPS WARPS
#include "common/fragment.glsl"
#include "attention/fragment_tiles.glsl"

FLOATS(0, q, readonly)
FLOATS(1, k, readonly)
FLOATS(2, v, readonly)
FLOATS(3, dout, readonly)
FLOATS(4, lse, readonly)
FLOATS(5, rowdot, readonly)
FLOATS(6, dq, )  // not writeonly: accumulate reads it

shared float DPs[WARPS * 16 * R];      // each warp's 16 x R of dP = dO·Vᵀ
shared uvec2 Gs[WARPS * 16 * LS / 4];  // each warp's 16 x R of dS, fp16

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, i0 = gl_WorkGroupID.x * R;
  const uint hk = kvHead(h);  // the key/value head this query head reads
  const uint warp = fragWarp(), lane = fragLane(), w16 = warp * 16;

  STAGE(Xs, q, Q, p.Tq, i0, b, h);
  STAGE(Ys, dout, DO, p.Tq, i0, b, h);
  // The workgroup's Q and dO rows are staged before a warp loads its own.
  barrier();
  FragH qf[ND], gf[ND];
  LOAD_ROWS(qf, Xs, w16);
  LOAD_ROWS(gf, Ys, w16);
  FragF acc[ND];
  FRAG_UNROLL for (uint d = 0; d < ND; ++d) acc[d] = fragFillF(0.0);

  // Lane r < 16 owns row w16 + r. A row past Tq, or one that sees no key (LSE = -inf), sees
  // no key here: its dS is zero.
  const uint i = i0 + w16 + lane;
  const bool row = lane < 16 && i < p.Tq;
  const float l = row ? LOAD(lse, p.lse_skip + rowIndex(b, h, i)) : NEG_INF;
  const float rd = row ? LOAD(rowdot, p.rowdot_skip + rowIndex(b, h, i)) : 0.0;
  const uint end = l == NEG_INF ? 0 : keyEnd(i);
  const uint tile_end = keyEnd(min(i0 + R, p.Tq) - 1);

  for (uint j0 = 0; j0 < tile_end; j0 += R) {
    // Every warp has loaded Q and dO (the first time) or read the last tile's K.
    barrier();
    STAGE(Xs, k, K, p.Tk, j0, b, hk);
    STAGE(Ys, v, V, p.Tk, j0, b, hk);
    // The tiles are whole before any warp reads them.
    barrier();
    SCORES2(Ss, qf, Xs, DPs, gf, Ys, w16 * R);
    // The warp's S and dP are in shared memory before its lanes read them by rows.
    fragWarpBarrier();
    if (lane < 16) {
      const uint at_row = (w16 + lane) * R;
      const uint n = j0 < end ? min(R, end - j0) : 0;  // keys of the tile the row sees
      for (uint c = 0; c < R; c += 4) {
        vec4 ds = vec4(0.0);
        for (uint t = 0; t < 4; ++t)
          if (c + t < n)
            ds[t] = exp(Ss[at_row + c + t] * p.scale - l) * (DPs[at_row + c + t] - rd);
        Gs[((w16 + lane) * LS + c) / 4] = packQuad(ds);
      }
    }
    // The rows' dS are in Gs before the warp loads them.
    fragWarpBarrier();
    PRODUCT(acc, Gs, w16 * LS / 4, Xs);
  }

  if (lane < 16) rowf[w16 + lane] = p.scale;
  // The factors are in rowf before the warp's lanes store dQ.
  fragWarpBarrier();
  STORE_ROWS(acc, dq, DQ, p.Tq, i0 + w16, b, h);
}
