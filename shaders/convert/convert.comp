#version 450
#extension GL_GOOGLE_include_directive : require
// dst = src between float formats (f32, f16, bf16; common/storage.glsl): widening is exact,
// narrowing rounds to nearest even. The cast of the graph, and the host's check that the
// device rounds as ops/reference/half.h does, bit for bit.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
  uint n;                   // elements
  uint src_skip, dst_skip;  // first elements inside the bindings
} p;

FLOATS(0, src, readonly)   // (n)
FLOATS(1, dst, writeonly)  // (n)

void main() {
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    STORE(dst, p.dst_skip + i, LOAD(src, p.src_skip + i));
}
