#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward on fragments, dK and dV (after attention/backward_rowdot.comp has
// written each row's dO·O): as attention/backward_kv.comp,
//   P_ij = exp(scale q_i·k_j - LSE_i),  dV_j += P_ij dO_i,
//   dS_ij = P_ij (dO_i·v_j - rowdot_i),  dK_j += scale dS_ij q_i,
// with Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ, dV += Pᵀ·dO and dK += dSᵀ·Q as 16x16x16 fp16 products summed
// in fp32. Q, K, V and dO are rounded to fp16 on their way into shared memory, and so are P
// and dS before the products that take them.
//
// A workgroup owns R = 16·WARPS key rows (attention/fragment_tiles.glsl); warp w keeps its 16
// rows of K and V as fragments and its 16 x D of dK and dV as accumulators, and walks the
// query tiles in order, those of each query head that reads this key/value head in turn
// (grouped-query attention): each key's sums are the workgroup's alone (no atomics, the same
// bits every run). Per query tile, Sᵀ and dPᵀ go to the warp's blocks of Ss and DPs, where
// lane r (< 16) reads key row r and writes its Pᵀ and dSᵀ as fp16. Query tiles before the first
// query that sees the workgroup's first key (causal) are skipped.
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
FLOATS(6, dk, )  // not writeonly: accumulate reads them
FLOATS(7, dv, )

shared float DPs[WARPS * 16 * R];      // each warp's 16 x R of dPᵀ = V·dOᵀ
shared uvec2 Ps[WARPS * 16 * LS / 4];  // each warp's 16 x R of Pᵀ, fp16
shared uvec2 Gs[WARPS * 16 * LS / 4];  // each warp's 16 x R of dSᵀ, fp16
shared float ls[R], rs[R];             // the query tile's LSE and row dots

void main() {
  const uint b = gl_WorkGroupID.z, hk = gl_WorkGroupID.y, j0 = gl_WorkGroupID.x * R;  // hk: a key/value head
  const uint warp = fragWarp(), lane = fragLane(), w16 = warp * 16;

  STAGE(Xs, k, K, p.Tk, j0, b, hk);
  STAGE(Ys, v, V, p.Tk, j0, b, hk);
  // The workgroup's K and V rows are staged before a warp loads its own.
  barrier();
  FragH kf[ND], vf[ND];
  LOAD_ROWS(kf, Xs, w16);
  LOAD_ROWS(vf, Ys, w16);
  FragF gk[ND], gv[ND];
  FRAG_UNROLL for (uint d = 0; d < ND; ++d) {
    gk[d] = fragFillF(0.0);
    gv[d] = fragFillF(0.0);
  }

  // Lane r < 16 owns key row w16 + r: the first query that sees it (none past Tk).
  const uint j = j0 + w16 + lane;
  const uint first = lane < 16 && j < p.Tk ? queryBegin(j) : p.Tq;
  const uint tile_begin = queryBegin(j0) / R * R;

  // The query heads that read this key/value head (grouped-query attention), one after
  // another: the sums stay the workgroup's own.
  for (uint h = hk * p.group; h < (hk + 1) * p.group; ++h)
  for (uint i0 = tile_begin; i0 < p.Tq; i0 += R) {
    // Every warp has loaded K and V (the first time) or read the last tile's Q and dO.
    barrier();
    STAGE(Xs, q, Q, p.Tq, i0, b, h);
    STAGE(Ys, dout, DO, p.Tq, i0, b, h);
    for (uint c = gl_LocalInvocationIndex; c < R; c += TILE) {
      const uint i = i0 + c;  // the last tile may hang over Tq: such a row sees no key
      ls[c] = i < p.Tq ? LOAD(lse, p.lse_skip + rowIndex(b, h, i)) : NEG_INF;
      rs[c] = i < p.Tq ? LOAD(rowdot, p.rowdot_skip + rowIndex(b, h, i)) : 0.0;
    }
    // The tiles are whole before any warp reads them.
    barrier();
    SCORES2(Ss, kf, Xs, DPs, vf, Ys, w16 * R);
    // The warp's Sᵀ and dPᵀ are in shared memory before its lanes read them by rows.
    fragWarpBarrier();
    if (lane < 16) {
      const uint at_row = (w16 + lane) * R;
      for (uint c = 0; c < R; c += 4) {
        vec4 pr = vec4(0.0), ds = vec4(0.0);
        for (uint t = 0; t < 4; ++t) {
          // Masked pairs and rows that see no key (LSE = -inf) contribute nothing.
          if (i0 + c + t < first || ls[c + t] == NEG_INF) continue;
          pr[t] = exp(Ss[at_row + c + t] * p.scale - ls[c + t]);
          ds[t] = pr[t] * (DPs[at_row + c + t] - rs[c + t]);
        }
        Ps[((w16 + lane) * LS + c) / 4] = packQuad(pr);
        Gs[((w16 + lane) * LS + c) / 4] = packQuad(ds);
      }
    }
    // The rows' Pᵀ and dSᵀ are in shared memory before the warp loads them.
    fragWarpBarrier();
    PRODUCT2(gv, Ps, Ys, gk, Gs, Xs, w16 * LS / 4);
  }

  if (lane < 16) rowf[w16 + lane] = p.scale;
  // The factors are in rowf before the warp's lanes store dK.
  fragWarpBarrier();
  STORE_ROWS(gk, dk, DK, p.Tk, j0 + w16, b, hk);
  if (lane < 16) rowf[w16 + lane] = 1.0;
  // dK's stores have read rowf (STORE_ROWS ends on a warp barrier); dV's factors are in it.
  fragWarpBarrier();
  STORE_ROWS(gv, dv, DV, p.Tk, j0 + w16, b, hk);
}
