#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward, dQ, for SIMD CPUs (see attention/texel.glsl; backward_q.comp has
// the algorithm): each lane owns one query row; per key tile every lane fetches one key and
// value row and the shuffles share them. Each lane first computes its row's dO · O itself and
// writes it for backward_kv_texel, which runs after this (a separate backward_rowdot pass of
// 8-row workgroups cost about as much as this whole kernel on lavapipe at T = 64).
#include "common/storage.glsl"
#include "attention/texel.glsl"

TEXELS(0, Qt)
TEXELS(1, Kt)
TEXELS(2, Vt)
TEXELS(3, DOt)
FLOATS(4, lse, readonly)
FLOATS(5, rowdot, writeonly)
FLOATS(6, dq, )
layout(set = 0, binding = 6) buffer DQb4 { vec4 dq4[]; };  // the same, with STORE4
TEXELS(7, Ot)

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, hk = kvHead(h);
  const uint i0 = gl_WorkGroupID.x * TILE, i = i0 + lane;
  const bool row = i < p.Tq;
  const uint ic = min(i, p.Tq - 1);

  vec4 qv[D4], dov[D4], g[D4];
  const int qbase = texelAt(Q, b, ic, p.Tq, h), dbase = texelAt(DO, b, ic, p.Tq, h),
            obase = texelAt(O, b, ic, p.Tq, h);
  float rd = 0.0;  // dO_i · O_i
  [[unroll]] for (uint c = 0; c < D4; ++c) {
    qv[c] = FETCH(Qt, qbase + int(c)) * p.scale;
    dov[c] = FETCH(DOt, dbase + int(c));
    rd += dot(dov[c], FETCH(Ot, obase + int(c)));
    g[c] = vec4(0.0);
  }
  if (row) STORE(rowdot, p.rowdot_skip + rowIndex(b, h, i), rd);
  // dQ uses the row dot as stored, as backward_kv_texel reads it (and the storage kernels do).
  rd = roundToFormat(rd, rowdot_dtype);
  const float l = row ? LOAD(lse, p.lse_skip + rowIndex(b, h, i)) : NEG_INF;
  const uint end = l == NEG_INF ? 0 : keyEnd(i);  // a row that sees no key: zero gradient
  const uint tile_end = keyEnd(min(i0 + TILE, p.Tq) - 1);  // uniform

  for (uint j0 = 0; j0 < tile_end; j0 += TILE) {
    const uint mine = min(j0 + lane, p.Tk - 1);
    const int kbase = texelAt(K, b, mine, p.Tk, hk), vbase = texelAt(V, b, mine, p.Tk, hk);
    float s[TILE], dp[TILE];
    [[unroll]] for (uint r = 0; r < TILE; ++r) s[r] = 0.0, dp[r] = 0.0;
    [[unroll]] for (uint c = 0; c < D4; ++c) {
      const vec4 kc = FETCH(Kt, kbase + int(c)), vc = FETCH(Vt, vbase + int(c));
      [[unroll]] for (uint r = 0; r < TILE; ++r) {
        s[r] += dot(qv[c], subgroupShuffle(kc, r));
        dp[r] += dot(dov[c], subgroupShuffle(vc, r));
      }
    }
    float ds[TILE];
    [[unroll]] for (uint r = 0; r < TILE; ++r)
      ds[r] = j0 + r < end ? exp(s[r] - l) * (dp[r] - rd) : 0.0;
    [[unroll]] for (uint c = 0; c < D4; ++c) {
      const vec4 kc = FETCH(Kt, kbase + int(c));
      vec4 a = g[c];
      [[unroll]] for (uint r = 0; r < TILE; ++r) a += ds[r] * subgroupShuffle(kc, r);
      g[c] = a;
    }
  }
  if (!row) return;
  const uint at_q = at(DQ, b, i, p.Tq, h);
  [[unroll]] for (uint c = 0; c < D4; ++c) {
    const vec4 gd = g[c] * p.scale;
    if (STORE4) {
      const uint x = at_q / 4 + c;
      dq4[x] = ACCUMULATE ? dq4[x] + gd : gd;
      continue;
    }
    [[unroll]] for (uint e = 0; e < 4; ++e) {
      const uint x = at_q + 4 * c + e;
      STORE(dq, x, ACCUMULATE ? LOAD(dq, x) + gd[e] : gd[e]);
    }
  }
}
