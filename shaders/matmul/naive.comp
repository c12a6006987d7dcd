#version 450
#extension GL_GOOGLE_include_directive : require
// C = alpha·op(A)·op(B) + beta·C + bias (+ residual), one invocation per output element, one
// batch entry per z. The reference point for the faster variants, and the fallback that works
// on any device. Transposes, batch strides (0 for a broadcast operand) and offsets are all
// strides in the push constants, so one pipeline serves every flag combination. Every tensor
// in any float format (common/storage.glsl); the sum and the epilogue are f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0, local_size_y_id = 1) in;

// The residual (laid out as C, from epi_off) is added last, after the bias. The ".sb4" build
// (FOUR_STORAGE_BUFFERS: a device that binds at most 4 storage buffers per stage) has no
// residual binding; ops/matmul.cpp adds the residual in a pass of its own after the product.
#ifndef FOUR_STORAGE_BUFFERS
layout(constant_id = 2) const bool RESIDUAL = false;
#endif

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

void main() {
  const uint col = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
  const uint z = gl_GlobalInvocationID.z;
  if (row >= p.M || col >= p.N) return;  // the grid is rounded up to whole workgroups
  const uint a0 = p.a_off + z * p.a_sb + row * p.a_sm, b0 = p.b_off + z * p.b_sb + col * p.b_sn;
  float sum = 0.0;
  for (uint k = 0; k < p.K; ++k) sum += LOAD(a, a0 + k * p.a_sk) * LOAD(b, b0 + k * p.b_sk);
  const uint e = (z * p.M + row) * p.N + col, at = p.c_off + e;
  float v = p.alpha * sum;
  if (p.beta != 0.0) v += p.beta * LOAD(c, at);  // beta == 0 must not read C: it may be NaN
  if (p.has_bias != 0) v += LOAD(bias, p.bias_off + col);
#ifndef FOUR_STORAGE_BUFFERS
  if (RESIDUAL) v += LOAD(residual, p.epi_off + e);
#endif
  STORE(c, at, v);
}
