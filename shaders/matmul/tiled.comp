#version 450
// C = A·B, the classic GPU kernel: a workgroup stages a BM x BK tile of A and a BK x BN
// tile of B in shared memory, and each invocation keeps a TM x TN block of C in
// registers. Every value loaded from global memory is reused TN (A) or TM (B) times from
// shared memory, and every shared-memory value TM*TN times from registers.
// Invocation (tx, ty) owns rows ty + i*WY and columns tx + j*WX of the tile (strided, not
// contiguous), so neighbouring invocations read neighbouring shared words (no bank
// conflicts) and write neighbouring words of C (coalesced).
layout(local_size_x_id = 0, local_size_y_id = 1) in;

layout(constant_id = 0) const uint WX = 16;  // invocations along N; BN = WX * TN
layout(constant_id = 1) const uint WY = 16;  // invocations along M; BM = WY * TM
layout(constant_id = 2) const uint BK = 16;  // depth of a shared tile
layout(constant_id = 3) const uint TM = 4;   // rows of C per invocation
layout(constant_id = 4) const uint TN = 4;   // columns of C per invocation
const uint BM = WY * TM, BN = WX * TN, THREADS = WX * WY;

layout(set = 0, binding = 0) readonly buffer A { float a[]; };   // (M,K)
layout(set = 0, binding = 1) readonly buffer B { float b[]; };   // (K,N)
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };  // (M,N)
// *_off: where each matrix starts inside its binding, in floats.
layout(push_constant) uniform Push { uint M, N, K, a_off, b_off, c_off; } p;

// As is stored k-major (transposed) so the inner loop reads a column of the A tile as
// consecutive words; one word of padding per k row keeps the transposing stores from all
// hitting the same bank.
shared float As[BK * (BM + 1)];  // As[kk * (BM + 1) + m]
shared float Bs[BK * BN];        // Bs[kk * BN + n]

void main() {
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint tid = ty * WX + tx;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;

  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    // Consecutive tids take consecutive k of one row of A: coalesced global reads.
    for (uint e = tid; e < BM * BK; e += THREADS) {
      const uint m = e / BK, kk = e % BK;
      const uint row = row0 + m, k = k0 + kk;
      // Past the last row or the last k the tile is zero-filled, so a partial tile adds
      // nothing to the sums (and never reads outside A).
      As[kk * (BM + 1) + m] = (row < p.M && k < p.K) ? a[p.a_off + row * p.K + k] : 0.0;
    }
    for (uint e = tid; e < BK * BN; e += THREADS) {
      const uint kk = e / BN, n = e % BN;
      const uint k = k0 + kk, col = col0 + n;
      // Zero past K or N, for the same reason.
      Bs[kk * BN + n] = (k < p.K && col < p.N) ? b[p.b_off + k * p.N + col] : 0.0;
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
      if (col < p.N) c[p.c_off + row * p.N + col] = acc[i][j];  // ... and the last column tile over N
    }
  }
}
