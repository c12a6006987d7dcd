#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention forward: O = softmax(scale Q Kᵀ + mask) V and LSE, never forming the
// Tq x Tk scores. A workgroup owns TILE query rows of one (batch, head), one invocation per
// row holding q and its output accumulator; key and value tiles pass through shared memory,
// and each tile updates the row's running max and sum (online softmax). Key tiles past the
// last one any row of the workgroup sees (causal) are not visited. Every tensor in any float
// format; the arithmetic, shared tiles included, is f32.
#include "common/storage.glsl"
#include "attention/common.glsl"

FLOATS(0, q, readonly)
FLOATS(1, k, readonly)
FLOATS(2, v, readonly)
FLOATS(3, o, writeonly)
#ifdef FOUR_STORAGE_BUFFERS
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) writes the f32 LSE
// through an R32F storage texel view, which counts against maxPerStageDescriptorStorageImages.
layout(set = 0, binding = 4, r32f) uniform writeonly imageBuffer lse_image;
#define STORE_LSE(I, V) imageStore(lse_image, int(I), vec4(V))
#else
FLOATS(4, lse, writeonly)
#define STORE_LSE(I, V) STORE(lse, I, V)
#endif

shared float ks[TILE][D];
shared float vs[TILE][D];

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, hk = kvHead(h);
  const uint i0 = gl_WorkGroupID.x * TILE, i = i0 + gl_LocalInvocationID.x;
  const bool row = i < p.Tq;

  float qi[D], acc[D], s[TILE];
  for (uint d = 0; d < D; ++d) {
    qi[d] = row ? LOAD(q, at(Q, b, i, p.Tq, h) + d) * p.scale : 0.0;
    acc[d] = 0.0;
  }
  float m = NEG_INF, l = 0.0;  // running max and sum of exp(s - m)
  const uint end = row ? keyEnd(i) : 0;
  const uint tile_end = keyEnd(min(i0 + TILE, p.Tq) - 1);  // the workgroup's last row sees most

  for (uint j0 = 0; j0 < tile_end; j0 += TILE) {
    barrier();  // the previous tile is no longer read
    for (uint e = gl_LocalInvocationID.x; e < TILE * D; e += TILE) {
      const uint r = e / D, d = e % D, j = j0 + r;
      ks[r][d] = j < p.Tk ? LOAD(k, at(K, b, j, p.Tk, hk) + d) : 0.0;
      vs[r][d] = j < p.Tk ? LOAD(v, at(V, b, j, p.Tk, hk) + d) : 0.0;
    }
    barrier();
    const uint n = j0 < end ? min(TILE, end - j0) : 0;  // keys of this tile the row sees
    if (n == 0) continue;
    float tile_max = NEG_INF;
    for (uint r = 0; r < n; ++r) {
      float dot = 0.0;
      for (uint d = 0; d < D; ++d) dot += qi[d] * ks[r][d];
      s[r] = dot;
      tile_max = max(tile_max, dot);
    }
    const float m_new = max(m, tile_max);
    const float correction = exp(m - m_new);  // 0 on the first visited tile (m = -inf)
    l *= correction;
    for (uint d = 0; d < D; ++d) acc[d] *= correction;
    for (uint r = 0; r < n; ++r) {
      const float e = exp(s[r] - m_new);
      l += e;
      for (uint d = 0; d < D; ++d) acc[d] += e * vs[r][d];
    }
    m = m_new;
  }
  if (!row) return;
  // A row that sees no key (causal, Tq > Tk) gets O = 0 and LSE = -inf, never NaN.
  const float inv = l > 0.0 ? 1.0 / l : 0.0;
  const uint oi = at(O, b, i, p.Tq, h);
  for (uint d = 0; d < D; ++d) STORE(o, oi + d, acc[d] * inv);
  STORE_LSE(p.lse_skip + rowIndex(b, h, i), l > 0.0 ? m + log(l) : NEG_INF);
}
