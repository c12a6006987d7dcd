#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention forward on fragments (tensor cores): O = softmax(scale Q Kᵀ + mask) V and
// LSE, as attention/forward.comp computes them, with Q·Kᵀ and P·V as 16x16x16 fp16 products
// summed in fp32. Q, K and V are rounded to fp16 on their way into shared memory, and so is
// P (each row's exp(s - running max), in [0, 1]) before P·V; the row sums that normalise O
// add those same rounded values. Everything else is fp32.
//
// A workgroup owns R = 16·WARPS query rows (attention/fragment_tiles.glsl); warp w keeps its
// 16 rows of Q as fragments and its 16 x D of O as accumulators. Per key tile: S = Q·Kᵀ goes
// to the warp's block of Ss, where lane r (< 16) reads row r, masks it, updates the row's
// running max m and sum l (online softmax), writes the row's P as fp16 and the factor that
// rescales the row's O; O's elements find their row through the coordinate hook
// (fragIndexF), then O += P·V. Key tiles no row of the workgroup sees (causal) are skipped.
#include "common/storage.glsl"
#include "attention/common.glsl"

layout(constant_id = 2) const uint WARPS = 2;  // warps per workgroup
layout(constant_id = 3) const uint SG = 32;    // lanes of a warp (TILE = WARPS·SG)

#define FRAG_WARPS WARPS
#define FRAG_INDEX
#include "common/fragment.glsl"
#include "attention/fragment_tiles.glsl"

FLOATS(0, q, readonly)
FLOATS(1, k, readonly)
FLOATS(2, v, readonly)
FLOATS(3, o, )  // not writeonly: STORE_ROWS reads it where it accumulates (never here)
FLOATS(4, lse, writeonly)

shared uvec2 Ps[WARPS * 16 * LS / 4];  // each warp's 16 x R probabilities, fp16

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, i0 = gl_WorkGroupID.x * R;
  const uint hk = kvHead(h);  // the key/value head this query head reads
  const uint warp = fragWarp(), lane = fragLane(), w16 = warp * 16;

  STAGE(Xs, q, Q, p.Tq, i0, b, h);
  // The workgroup's Q rows are staged before a warp loads its own.
  barrier();
  FragH qf[ND];
  LOAD_ROWS(qf, Xs, w16);
  FragF of[ND];
  FRAG_UNROLL for (uint d = 0; d < ND; ++d) of[d] = fragFillF(0.0);
  const FragF index = fragIndexF();

  // Lane r < 16 owns row w16 + r: its running max and sum, and the keys it sees (none for a
  // row past Tq, which is computed like the others and never stored).
  const uint i = i0 + w16 + lane;
  const uint end = lane < 16 && i < p.Tq ? keyEnd(i) : 0;
  float m = NEG_INF, l = 0.0;
  const uint tile_end = keyEnd(min(i0 + R, p.Tq) - 1);  // the workgroup's last row sees most

  for (uint j0 = 0; j0 < tile_end; j0 += R) {
    // Every warp has loaded Q (the first time) or read the last tile's K and V.
    barrier();
    STAGE(Xs, k, K, p.Tk, j0, b, hk);
    STAGE(Ys, v, V, p.Tk, j0, b, hk);
    // The tiles are whole before any warp reads them.
    barrier();
    SCORES(Ss, w16 * R, qf, Xs);
    // The warp's scores are in Ss before its lanes read them by rows.
    fragWarpBarrier();
    if (lane < 16) {
      const uint row = (w16 + lane) * R;
      const uint n = j0 < end ? min(R, end - j0) : 0;  // keys of the tile the row sees
      float tile_max = NEG_INF;
      for (uint c = 0; c < n; ++c) tile_max = max(tile_max, Ss[row + c] * p.scale);
      const float m_new = max(m, tile_max);
      // O and l so far are scaled to the new max (zero until the row has seen a key).
      const float correction = m == NEG_INF ? 0.0 : exp(m - m_new);
      float sum = 0.0;
      for (uint c = 0; c < R; c += 4) {
        vec4 e = vec4(0.0);
        for (uint t = 0; t < 4; ++t)
          if (c + t < n) e[t] = exp(Ss[row + c + t] * p.scale - m_new);
        Ps[((w16 + lane) * LS + c) / 4] = packQuad(e);
        const vec4 rounded = roundQuad(e);  // the P that P·V multiplies
        sum += rounded.x + rounded.y + rounded.z + rounded.w;
      }
      l = l * correction + sum;
      m = m_new;
      rowf[w16 + lane] = correction;
    }
    // The rows' P and corrections are in shared memory before the warp reads them.
    fragWarpBarrier();
    FRAG_UNROLL for (uint d = 0; d < ND; ++d)
      for (int e = 0; e < FRAG_LENGTH(index); ++e)
        FRAG_EL(of[d], e) *= rowf[w16 + uint(FRAG_EL(index, e)) / 16];
    PRODUCT(of, Ps, w16 * LS / 4, Ys);
  }

  // The last tile's corrections are read before they are overwritten.
  fragWarpBarrier();
  if (lane < 16) {
    // A row that sees no key (causal, Tq > Tk) gets O = 0 and LSE = -inf, never NaN.
    rowf[w16 + lane] = l > 0.0 ? 1.0 / l : 0.0;
    if (i < p.Tq) STORE(lse, p.lse_skip + rowIndex(b, h, i), l > 0.0 ? m + log(l) : NEG_INF);
  }
  // Every row's 1/l is in rowf before the warp's lanes store O.
  fragWarpBarrier();
  STORE_ROWS(of, o, O, p.Tq, i0 + w16, b, h);
}
