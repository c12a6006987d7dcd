#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention forward for SIMD CPUs (see attention/texel.glsl; forward.comp has the
// algorithm): each lane owns one query row, TILE = the subgroup size; per key tile every
// lane fetches one key (and value) row and the shuffles share them.
#include "common/storage.glsl"
#include "attention/texel.glsl"

TEXELS(0, Qt)
TEXELS(1, Kt)
TEXELS(2, Vt)
FLOATS(3, o, writeonly)
layout(set = 0, binding = 3) writeonly buffer Ob4 { vec4 o4[]; };  // the same, with STORE4
FLOATS(4, lse, writeonly)

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, hk = kvHead(h);
  const uint i0 = gl_WorkGroupID.x * TILE, i = i0 + lane;
  const bool row = i < p.Tq;

  vec4 qv[D4], acc[D4];
  const int qbase = texelAt(Q, b, min(i, p.Tq - 1), p.Tq, h);
  [[unroll]] for (uint c = 0; c < D4; ++c) {
    qv[c] = FETCH(Qt, qbase + int(c)) * p.scale;
    acc[c] = vec4(0.0);
  }
  float m = NEG_INF, l = 0.0;
  const uint end = row ? keyEnd(i) : 0;
  const uint tile_end = keyEnd(min(i0 + TILE, p.Tq) - 1);  // uniform: shuffles stay converged

  for (uint j0 = 0; j0 < tile_end; j0 += TILE) {
    const uint mine = min(j0 + lane, p.Tk - 1);  // the key row this lane fetches for all
    const int kbase = texelAt(K, b, mine, p.Tk, hk), vbase = texelAt(V, b, mine, p.Tk, hk);
    float s[TILE];
    [[unroll]] for (uint r = 0; r < TILE; ++r) s[r] = 0.0;
    [[unroll]] for (uint c = 0; c < D4; ++c) {
      const vec4 kc = FETCH(Kt, kbase + int(c));
      [[unroll]] for (uint r = 0; r < TILE; ++r) s[r] += dot(qv[c], subgroupShuffle(kc, r));
    }
    float tile_max = NEG_INF;
    [[unroll]] for (uint r = 0; r < TILE; ++r) {
      if (j0 + r >= end) s[r] = NEG_INF;  // masked, or past Tk
      tile_max = max(tile_max, s[r]);
    }
    // m_new stays -inf while the row has seen no key; then nothing is added.
    const float m_new = max(m, tile_max);
    const bool none = m_new == NEG_INF;
    const float correction = none ? 1.0 : exp(m - m_new);
    float pr[TILE];
    float sum = 0.0;
    [[unroll]] for (uint r = 0; r < TILE; ++r) {
      pr[r] = none ? 0.0 : exp(s[r] - m_new);
      sum += pr[r];
    }
    l = l * correction + sum;
    [[unroll]] for (uint c = 0; c < D4; ++c) {
      const vec4 vc = FETCH(Vt, vbase + int(c));
      vec4 a = acc[c] * correction;
      [[unroll]] for (uint r = 0; r < TILE; ++r) a += pr[r] * subgroupShuffle(vc, r);
      acc[c] = a;
    }
    m = m_new;
  }
  if (!row) return;
  const float inv = l > 0.0 ? 1.0 / l : 0.0;
  const uint oi = at(O, b, i, p.Tq, h);
  [[unroll]] for (uint c = 0; c < D4; ++c) {
    const vec4 r = acc[c] * inv;
    if (STORE4) {
      o4[oi / 4 + c] = r;
      continue;
    }
    [[unroll]] for (uint e = 0; e < 4; ++e) STORE(o, oi + 4 * c + e, r[e]);
  }
  STORE(lse, p.lse_skip + rowIndex(b, h, i), l > 0.0 ? m + log(l) : NEG_INF);
}
