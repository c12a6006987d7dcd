#version 450
// C = A·B, one invocation per output element. The reference point for the faster
// variants, and the fallback that works on any device.
layout(local_size_x_id = 0, local_size_y_id = 1) in;

layout(set = 0, binding = 0) readonly buffer A { float a[]; };   // (M,K)
layout(set = 0, binding = 1) readonly buffer B { float b[]; };   // (K,N)
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };  // (M,N)
// *_off: where each matrix starts inside its binding, in floats. Bindings start at the
// device's storage-offset alignment, so a tensor at any 4-byte offset still binds.
layout(push_constant) uniform Push { uint M, N, K, a_off, b_off, c_off; } p;

void main() {
  const uint col = gl_GlobalInvocationID.x, row = gl_GlobalInvocationID.y;
  if (row >= p.M || col >= p.N) return;  // the grid is rounded up to whole workgroups
  float sum = 0.0;
  for (uint k = 0; k < p.K; ++k) sum += a[p.a_off + row * p.K + k] * b[p.b_off + k * p.N + col];
  c[p.c_off + row * p.N + col] = sum;
}
