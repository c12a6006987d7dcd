#version 450
#extension GL_GOOGLE_include_directive : require
// C = alpha·op(A)·op(B) + beta·C + bias (+ residual), the classic GPU kernel: a workgroup stages a
// BM x BK tile of op(A) and a BK x BN tile of op(B) in shared memory, and each invocation
// keeps a TM x TN block of C in registers. Every value loaded from global memory is reused
// TN (A) or TM (B) times from shared memory, and every shared-memory value TM*TN times from
// registers. One batch entry per z.
// Invocation (tx, ty) owns rows ty + i*WY and columns tx + j*WX of the tile (strided, not
// contiguous), so neighbouring invocations read neighbouring shared words (no bank
// conflicts) and write neighbouring words of C (coalesced).
// Transposes, batch strides (0 for a broadcast operand) and offsets are strides in the push
// constants; the tile loads walk the operand along whichever axis is contiguous in memory.
// Every tensor in any float format (common/storage.glsl): the tiles, the sums and the
// epilogue are f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1) in;

layout(constant_id = 0) const uint WX = 16;  // invocations along N; BN = WX * TN
layout(constant_id = 1) const uint WY = 16;  // invocations along M; BM = WY * TM
layout(constant_id = 2) const uint BK = 16;  // depth of a shared tile
layout(constant_id = 3) const uint TM = 4;   // rows of C per invocation
layout(constant_id = 4) const uint TN = 4;   // columns of C per invocation
// The residual (laid out as C, from epi_off) is added last, after the bias. The ".sb4" build
// (FOUR_STORAGE_BUFFERS: a device that binds at most 4 storage buffers per stage) has no
// residual binding; ops/matmul.cpp adds the residual in a pass of its own after the product.
#ifndef FOUR_STORAGE_BUFFERS
layout(constant_id = 5) const bool RESIDUAL = false;
#endif
const uint BM = WY * TM, BN = WX * TN, THREADS = WX * WY;

FLOATS(0, a, readonly)
FLOATS(1, b, readonly)
FLOATS(2, c, )  // (batch,M,N), contiguous
FLOATS(3, bias, readonly)  // (N), if has_bias
#ifndef FOUR_STORAGE_BUFFERS
FLOATS(4, residual, readonly)  // like C, if RESIDUAL
#endif
// op(A)[z][m][k] = a[a_off + z*a_sb + m*a_sm + k*a_sk], op(B)[z][k][n] likewise; *_off include
// the skip from the binding's aligned start to the tensor (ops/binding.h).
layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_off, a_sm, a_sk, a_sb;
  uint b_off, b_sk, b_sn, b_sb;
  uint c_off;
  uint bias_off, has_bias;
  float alpha, beta;
  uint k_chunk, colsum_off;  // unused here (ops::MatmulPush's layout)
  float colsum_beta;         // unused here
  uint epi_off;              // the residual's first element in its binding
} p;

// As is stored k-major (transposed) so the inner loop reads a column of the A tile as
// consecutive words; one word of padding per k row keeps the transposing stores from all
// hitting the same bank.
shared float As[BK * (BM + 1)];  // As[kk * (BM + 1) + m]
shared float Bs[BK * BN];        // Bs[kk * BN + n]

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * WX + tx;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint a0 = p.a_off + z * p.a_sb, b0 = p.b_off + z * p.b_sb;
  // Consecutive tids take consecutive addresses where the operand allows: coalesced reads.
  const bool a_along_k = p.a_sk == 1, b_along_n = p.b_sn == 1;

  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    for (uint e = tid; e < BM * BK; e += THREADS) {
      const uint m = a_along_k ? e / BK : e % BM, kk = a_along_k ? e % BK : e / BM;
      const uint row = row0 + m, k = k0 + kk;
      // Past the last row or the last k the tile is zero-filled, so a partial tile adds
      // nothing to the sums (and never reads outside A).
      As[kk * (BM + 1) + m] = (row < p.M && k < p.K) ? LOAD(a, a0 + row * p.a_sm + k * p.a_sk) : 0.0;
    }
    for (uint e = tid; e < BK * BN; e += THREADS) {
      const uint kk = b_along_n ? e / BN : e % BK, n = b_along_n ? e % BN : e / BK;
      const uint k = k0 + kk, col = col0 + n;
      // Zero past K or N, for the same reason.
      Bs[kk * BN + n] = (k < p.K && col < p.N) ? LOAD(b, b0 + k * p.b_sk + col * p.b_sn) : 0.0;
    }
    // The tiles must be complete before any invocation reads them.
    barrier();

    for (uint kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      for (uint i = 0; i < TM; ++i) av[i] = As[kk * (BM + 1) + ty + i * WY];
      for (uint j = 0; j < TN; ++j) bv[j] = Bs[kk * BN + tx + j * WX];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i][j] += av[i] * bv[j];
    }
    // Every invocation must be done reading the tiles before the next k0 overwrites them.
    barrier();
  }

  for (uint i = 0; i < TM; ++i) {
    const uint row = row0 + ty + i * WY;
    if (row >= p.M) break;  // the last row tile may hang over M
    for (uint j = 0; j < TN; ++j) {
      const uint col = col0 + tx + j * WX;
      if (col >= p.N) continue;  // ... and the last column tile over N
      const uint e = (z * p.M + row) * p.N + col, at = p.c_off + e;
      float v = p.alpha * acc[i][j];
      if (p.beta != 0.0) v += p.beta * LOAD(c, at);  // beta == 0 must not read C: it may be NaN
      if (p.has_bias != 0) v += LOAD(bias, p.bias_off + col);
#ifndef FOUR_STORAGE_BUFFERS
      if (RESIDUAL) v += LOAD(residual, p.epi_off + e);
#endif
      STORE(c, at, v);
    }
  }
}
