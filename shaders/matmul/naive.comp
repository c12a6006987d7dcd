#version 450
// C = alpha·op(A)·op(B) + beta·C, one invocation per output element, one batch entry per
// z. The reference point for the faster variants, and the fallback that works on any device.
// Transposes, batch strides (0 for a broadcast operand) and offsets are all strides in the
// push constants, so one pipeline serves every flag combination. The bias is added by a
// second dispatch on the host side (this kernel keeps three bindings).
layout(local_size_x_id = 0, local_size_y_id = 1) in;

layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) buffer C { float c[]; };  // (batch,M,N), contiguous
// op(A)[z][m][k] = a[a_off + z*a_sb + m*a_sm + k*a_sk], op(B)[z][k][n] likewise; *_off include
// the skip from the binding's aligned start to the tensor (ops/binding.h).
layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_off, a_sm, a_sk, a_sb;
  uint b_off, b_sk, b_sn, b_sb;
  uint c_off;
  uint bias_off, has_bias;  // unused here
  float alpha, beta;
} p;

void main() {
  const uint col = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
  const uint z = gl_GlobalInvocationID.z;
  if (row >= p.M || col >= p.N) return;  // the grid is rounded up to whole workgroups
  const uint a0 = p.a_off + z * p.a_sb + row * p.a_sm, b0 = p.b_off + z * p.b_sb + col * p.b_sn;
  float sum = 0.0;
  for (uint k = 0; k < p.K; ++k) sum += a[a0 + k * p.a_sk] * b[b0 + k * p.b_sk];
  const uint at = p.c_off + (z * p.M + row) * p.N + col;
  // beta == 0 must not read C: it may hold anything, NaN included.
  c[at] = p.beta == 0.0 ? p.alpha * sum : p.alpha * sum + p.beta * c[at];
}
