#version 450
// out[i] = mean + std * z_i, z from Box-Muller: each counter block's words (w0,w1) give
// z_{4b}, z_{4b+1} and (w2,w3) give z_{4b+2}, z_{4b+3}. The radius uses u in (0, 1], so
// log() never sees 0 (|z| <= sqrt(2 ln 2^24) = 5.77); the angle stays in [-pi, pi), the
// range where Vulkan bounds the error of sin/cos.
#extension GL_GOOGLE_include_directive : require
#include "common/philox.glsl"
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) writeonly buffer Out { float out_values[]; };  // (n)
layout(set = 0, binding = 1) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push { uint n, stream; float mean, stddev; } p;

const float kPi = 3.14159265358979;

vec2 boxMuller(uint a, uint b) {
  const float r = sqrt(-2.0 * log(philoxUnitNonZero(a)));
  const float theta = kPi * (2.0 * philoxUnit(b) - 1.0);
  return r * vec2(cos(theta), sin(theta));
}

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uvec4 bits = philoxBlock(state, p.stream, b);
    const vec4 z = vec4(boxMuller(bits.x, bits.y), boxMuller(bits.z, bits.w));
    for (uint k = 0; k < 4; ++k)
      if (4 * b + k < p.n) out_values[4 * b + k] = p.mean + p.stddev * z[k];  // partial last block
  }
}
