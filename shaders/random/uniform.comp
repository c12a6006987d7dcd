#version 450
// out[i] = lo + (hi - lo) * u_i with u_i in [0, 1) the top 24 bits of stream word i.
#extension GL_GOOGLE_include_directive : require
#include "common/philox.glsl"
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) writeonly buffer Out { float out_values[]; };  // (n)
layout(set = 0, binding = 1) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push { uint n, stream; float lo, hi; } p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uvec4 bits = philoxBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k)
      if (4 * b + k < p.n)  // the last block may be partial
        out_values[4 * b + k] = p.lo + (p.hi - p.lo) * philoxUnit(bits[k]);
  }
}
