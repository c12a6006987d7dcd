#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward, dK and dV, for SIMD CPUs (see attention/texel.glsl;
// backward_kv.comp has the algorithm, the group's query heads included): each lane owns one
// key row; per query tile every lane fetches one query's q and dO rows, LSE and row dot, and
// the shuffles share them.
#include "common/storage.glsl"
#include "attention/texel.glsl"

TEXELS(0, Qt)
TEXELS(1, Kt)
TEXELS(2, Vt)
TEXELS(3, DOt)
// LSE and the row dots as R32F texels: each lane fetches its query's per tile, and a
// storage load at a lane's own address is a scalar loop on llvmpipe.
TEXELS(4, Lt)
TEXELS(5, Rt)
FLOATS(6, dk, )
FLOATS(7, dv, )
layout(set = 0, binding = 6) buffer DKb4 { vec4 dk4[]; };  // the same two, with STORE4
layout(set = 0, binding = 7) buffer DVb4 { vec4 dv4[]; };

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint b = gl_WorkGroupID.z, hk = gl_WorkGroupID.y;  // a key/value head
  const uint j0 = gl_WorkGroupID.x * TILE, j = j0 + lane;
  const bool key = j < p.Tk;
  const uint jc = min(j, p.Tk - 1);

  vec4 kv[D4], vv[D4], gk[D4], gv[D4];
  const int kbase = texelAt(K, b, jc, p.Tk, hk), vbase = texelAt(V, b, jc, p.Tk, hk);
  [[unroll]] for (uint c = 0; c < D4; ++c) {
    kv[c] = FETCH(Kt, kbase + int(c)) * p.scale;
    vv[c] = FETCH(Vt, vbase + int(c));
    gk[c] = vec4(0.0);
    gv[c] = vec4(0.0);
  }
  const uint first = key ? queryBegin(j) : p.Tq;
  const uint tile_begin = queryBegin(j0) / TILE * TILE;  // uniform

  for (uint h = hk * p.group; h < (hk + 1) * p.group; ++h)  // uniform
  for (uint i0 = tile_begin; i0 < p.Tq; i0 += TILE) {
    const uint mine = min(i0 + lane, p.Tq - 1);  // the query row this lane fetches for all
    const int qbase = texelAt(Q, b, mine, p.Tq, h), dbase = texelAt(DO, b, mine, p.Tq, h);
    const float l_mine = FETCH(Lt, int(p.lse_skip + rowIndex(b, h, mine))).x;
    const float my_l = i0 + lane < p.Tq ? l_mine : NEG_INF;
    const float my_rd = FETCH(Rt, int(p.rowdot_skip + rowIndex(b, h, mine))).x;
    float s[TILE], dp[TILE];
    vec4 qrow[D4], drow[D4];  // this lane's fetched rows, reused by the update below
    [[unroll]] for (uint r = 0; r < TILE; ++r) s[r] = 0.0, dp[r] = 0.0;
    [[unroll]] for (uint c = 0; c < D4; ++c) {
      const vec4 qc = FETCH(Qt, qbase + int(c)), dc = FETCH(DOt, dbase + int(c));
      qrow[c] = qc, drow[c] = dc;
      [[unroll]] for (uint r = 0; r < TILE; ++r) {
        s[r] += dot(kv[c], subgroupShuffle(qc, r));
        dp[r] += dot(vv[c], subgroupShuffle(dc, r));
      }
    }
    float pr[TILE], ds[TILE];
    [[unroll]] for (uint r = 0; r < TILE; ++r) {
      const float lr = subgroupShuffle(my_l, r), rdr = subgroupShuffle(my_rd, r);
      // Masked pairs, queries past Tq and queries that see no key (LSE = -inf) add nothing.
      const bool seen = i0 + r >= first && lr != NEG_INF;
      pr[r] = seen ? exp(s[r] - lr) : 0.0;
      ds[r] = pr[r] * (dp[r] - rdr);
    }
    [[unroll]] for (uint c = 0; c < D4; ++c) {
      const vec4 qc = qrow[c], dc = drow[c];
      vec4 a = gk[c], e = gv[c];
      [[unroll]] for (uint r = 0; r < TILE; ++r) {
        a += ds[r] * subgroupShuffle(qc, r);
        e += pr[r] * subgroupShuffle(dc, r);
      }
      gk[c] = a;
      gv[c] = e;
    }
  }
  if (!key) return;
  const uint at_k = at(DK, b, j, p.Tk, hk), at_v = at(DV, b, j, p.Tk, hk);
  [[unroll]] for (uint c = 0; c < D4; ++c) {
    const vec4 gkd = gk[c] * p.scale, gvd = gv[c];
    if (STORE4) {
      const uint xk = at_k / 4 + c, xv = at_v / 4 + c;
      dk4[xk] = ACCUMULATE ? dk4[xk] + gkd : gkd;
      dv4[xv] = ACCUMULATE ? dv4[xv] + gvd : gvd;
      continue;
    }
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      const uint xk = at_k + 4 * c + e, xv = at_v + 4 * c + e;
      STORE(dk, xk, ACCUMULATE ? LOAD(dk, xk) + gkd[e] : gkd[e]);
      STORE(dv, xv, ACCUMULATE ? LOAD(dv, xv) + gvd[e] : gvd[e]);
    }
  }
}
