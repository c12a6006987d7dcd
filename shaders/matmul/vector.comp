#version 450
#extension GL_GOOGLE_include_directive : require
// C = alpha·op(A)·op(B) + beta·C + bias (+ residual), tiled.comp's algorithm with vec4 data paths for GPUs:
// a workgroup stages a BM x BK tile of op(A) and a BK x BN tile of op(B) in shared memory as
// vec4s, and each invocation keeps a TM x TN block of C in registers as TM x TN/4 vec4s.
// Per k step an invocation reads TM/4 + TN/4 vec4s from shared memory for TM·TN multiply-adds
// (tiled.comp reads TM + TN floats).
// Invocation (tx, ty) owns the vec4 column groups tx + j*WX and the row groups ty + i*WY of
// the tile (4 rows or columns per group, groups strided): neighbouring invocations read
// neighbouring 16-byte words of the B tile and write neighbouring 16 bytes of C.
// A_VEC / B_VEC: the operand is read from global memory as whole vec4s along k (A) or n (B),
// which the host chooses when that axis is contiguous, K (N) % 4 == 0 and every row starts on
// 16 bytes; otherwise one float per load along whichever axis is contiguous.
// Tile sizes come from specialization constants (ops::MatmulTiling), one batch entry per z.
// Split-K (k_chunk > 0, ops/matmul.cpp): batch entry z is the slice of K from z·k_chunk, its
// operands found through the batch strides as any batch's; z's depth is the rest of K if shorter.
// Every tensor in any float format (common/storage.glsl); the tiles, the sums and the
// epilogue are f32. A_VEC / B_VEC read four elements at a time in every format: 16 bytes of
// f32, or 8 bytes of a 16-bit operand widened in registers (the binding starts on 16 bytes,
// so the element offsets the host checks are the byte alignment too).
#include "common/storage.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1) in;

layout(constant_id = 0) const uint WX = 16;  // invocations along N; BN = WX * TN
layout(constant_id = 1) const uint WY = 16;  // invocations along M; BM = WY * TM
layout(constant_id = 2) const uint BK = 16;  // depth of a shared tile, a multiple of 4
layout(constant_id = 3) const uint TM = 8;   // rows of C per invocation, a multiple of 4
layout(constant_id = 4) const uint TN = 8;   // columns of C per invocation, a multiple of 4
layout(constant_id = 5) const bool A_VEC = false;
layout(constant_id = 6) const bool B_VEC = false;
// The residual (laid out as C, from epi_off) is added last, after the bias. The ".sb4" build
// (FOUR_STORAGE_BUFFERS: a device that binds at most 4 storage buffers per stage) has no
// residual binding; ops/matmul.cpp adds the residual in a pass of its own after the product.
#ifndef FOUR_STORAGE_BUFFERS
layout(constant_id = 7) const bool RESIDUAL = false;
#endif
const uint BM = WY * TM, BN = WX * TN, THREADS = WX * WY;
const uint BM4 = BM / 4, BN4 = BN / 4, TM4 = TM / 4, TN4 = TN / 4;

// Each input binding seen as elements in its format for the general path, and as f32 vec4s
// for A_VEC / B_VEC.
FLOATS(0, a, readonly)
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
FLOATS(1, b, readonly)
layout(set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
#ifdef STORAGE16
layout(set = 0, binding = 0) readonly buffer A8 { uvec2 a8[]; };
layout(set = 0, binding = 1) readonly buffer B8 { uvec2 b8[]; };
// Four 16-bit elements (little-endian halves of two words) as floats.
vec4 widen4(uvec2 w, uint dtype) {
  if (dtype == kF16) return vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y));
  return uintBitsToFloat(uvec4(w.x << 16, w.x & 0xffff0000u, w.y << 16, w.y & 0xffff0000u));
}
#define QUAD(NAME, I) (NAME##_dtype == kF32 ? NAME##4[I] : widen4(NAME##8[I], NAME##_dtype))
#else
#define QUAD(NAME, I) NAME##4[I]
#endif
FLOATS(2, c, )  // (batch,M,N), contiguous
FLOATS(3, bias, readonly)  // (N), if has_bias
#ifndef FOUR_STORAGE_BUFFERS
FLOATS(4, residual, readonly)  // like C, if RESIDUAL
#endif
// As tiled.comp: op(A)[z][m][k] = a[a_off + z*a_sb + m*a_sm + k*a_sk], op(B) likewise.
layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_off, a_sm, a_sk, a_sb;
  uint b_off, b_sk, b_sn, b_sb;
  uint c_off;
  uint bias_off, has_bias;
  float alpha, beta;
  uint k_chunk;  // 0: no split; each z runs over all of K
  uint colsum_off;     // unused here (ops::MatmulPush's layout)
  float colsum_beta;   // unused here
  uint epi_off;        // the residual's first element in its binding
} p;

// As is k-major: As[kk * BM4 + m / 4][m % 4], so a k step reads a column of the A tile as
// vec4s; Bs[kk * BN4 + n / 4][n % 4].
shared vec4 As[BK * BM4];
shared vec4 Bs[BK * BN4];

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * WX + tx;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint a0 = p.a_off + z * p.a_sb, b0 = p.b_off + z * p.b_sb;
  const bool a_along_k = p.a_sk == 1, b_along_n = p.b_sn == 1;
  const uint K = p.k_chunk == 0 ? p.K : min(p.k_chunk, p.K - z * p.k_chunk);

  vec4 acc[TM][TN4];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN4; ++j) acc[i][j] = vec4(0.0);

  for (uint k0 = 0; k0 < K; k0 += BK) {
    // Past the last row, column or k the tiles are zero-filled, so a partial tile adds
    // nothing (and nothing outside A or B is read). With A_VEC, K % 4 == 0 (k_chunk too): a vec4 along k
    // is wholly inside or wholly past K; B_VEC likewise with N.
    if (A_VEC) {
      for (uint e = tid; e < BM * BK / 4; e += THREADS) {
        const uint m = e / (BK / 4), kq = (e % (BK / 4)) * 4;
        const uint row = row0 + m, k = k0 + kq;
        const vec4 v = (row < p.M && k < K) ? QUAD(a, (a0 + row * p.a_sm + k) / 4) : vec4(0.0);
        for (uint q = 0; q < 4; ++q) As[(kq + q) * BM4 + m / 4][m % 4] = v[q];
      }
    } else {
      for (uint e = tid; e < BM * BK; e += THREADS) {
        const uint m = a_along_k ? e / BK : e % BM, kk = a_along_k ? e % BK : e / BM;
        const uint row = row0 + m, k = k0 + kk;
        As[kk * BM4 + m / 4][m % 4] =
            (row < p.M && k < K) ? LOAD(a, a0 + row * p.a_sm + k * p.a_sk) : 0.0;
      }
    }
    if (B_VEC) {
      for (uint e = tid; e < BK * BN4; e += THREADS) {
        const uint kk = e / BN4, n4 = e % BN4;
        const uint k = k0 + kk, col = col0 + n4 * 4;
        Bs[kk * BN4 + n4] = (k < K && col < p.N) ? QUAD(b, (b0 + k * p.b_sk + col) / 4) : vec4(0.0);
      }
    } else {
      for (uint e = tid; e < BK * BN; e += THREADS) {
        const uint kk = b_along_n ? e / BN : e % BK, n = b_along_n ? e % BN : e / BK;
        const uint k = k0 + kk, col = col0 + n;
        Bs[kk * BN4 + n / 4][n % 4] =
            (k < K && col < p.N) ? LOAD(b, b0 + k * p.b_sk + col * p.b_sn) : 0.0;
      }
    }
    // The tiles must be complete before any invocation reads them.
    barrier();

    for (uint kk = 0; kk < BK; ++kk) {
      vec4 av[TM4], bv[TN4];
      for (uint i = 0; i < TM4; ++i) av[i] = As[kk * BM4 + ty + i * WY];
      for (uint j = 0; j < TN4; ++j) bv[j] = Bs[kk * BN4 + tx + j * WX];
      for (uint i = 0; i < TM4; ++i)
        for (uint r = 0; r < 4; ++r)
          for (uint j = 0; j < TN4; ++j) acc[i * 4 + r][j] += av[i][r] * bv[j];
    }
    // Every invocation must be done reading the tiles before the next k0 overwrites them.
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    const uint row = row0 + (ty + (i / 4) * WY) * 4 + i % 4;
    if (row >= p.M) continue;  // the last row tile may hang over M
    for (uint j = 0; j < TN4; ++j) {
      const uint col4 = col0 + (tx + j * WX) * 4;
      for (uint q = 0; q < 4; ++q) {
        const uint col = col4 + q;
        if (col >= p.N) break;  // ... and the last column tile over N
        const uint e = (z * p.M + row) * p.N + col, at = p.c_off + e;
        float v = p.alpha * acc[i][j][q];
        if (p.beta != 0.0) v += p.beta * LOAD(c, at);  // beta == 0 must not read C: it may be NaN
        if (p.has_bias != 0) v += LOAD(bias, p.bias_off + col);
#ifndef FOUR_STORAGE_BUFFERS
        if (RESIDUAL) v += LOAD(residual, p.epi_off + e);
#endif
        STORE(c, at, v);
      }
    }
  }
}
