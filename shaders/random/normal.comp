#version 450
// out[i] = mean + std * z_i, z standard normal by Box-Muller (common/normal.glsl).
#extension GL_GOOGLE_include_directive : require
#include "common/normal.glsl"
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) writeonly buffer Out { float out_values[]; };  // (n)
layout(set = 0, binding = 1) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push { uint n, stream; float mean, stddev; } p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const vec4 z = normalBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k)
      if (4 * b + k < p.n) out_values[4 * b + k] = p.mean + p.stddev * z[k];  // partial last block
  }
}
