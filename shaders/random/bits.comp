#version 450
// Raw Philox bits: out[i] = word i of the stream (see common/philox.glsl). One invocation
// per counter block of 4 elements, grid-stride so any n fits the workgroup-count limit.
#extension GL_GOOGLE_include_directive : require
#include "common/philox.glsl"
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) writeonly buffer Out { uint out_bits[]; };  // (n) u32
layout(set = 0, binding = 1) readonly buffer Rng { uint rng[]; };        // {seed, offset} x 2 words
layout(push_constant) uniform Push { uint n, stream; } p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uvec4 bits = philoxBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k)
      if (4 * b + k < p.n) out_bits[4 * b + k] = bits[k];  // the last block may be partial
  }
}
