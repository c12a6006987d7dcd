// Standard normal draws from Philox words by Box-Muller, shared by every kernel that draws
// them (random/normal, random/reparameterize and its backward), so all see the same values:
// element i of a stream takes the words (2m, 2m+1) of its counter block, m = (i % 4) / 2;
// even i the cosine, odd i the sine. The radius uses u in (0, 1], so log() never sees 0
// (|z| <= sqrt(2 ln 2^24) = 5.77); the angle stays in [-pi, pi), the range where Vulkan
// bounds the error of sin/cos.
#ifndef VKGRAD_COMMON_NORMAL_GLSL
#define VKGRAD_COMMON_NORMAL_GLSL

#include "common/philox.glsl"

const float kPi = 3.14159265358979;

vec2 boxMuller(uint a, uint b) {
  const float r = sqrt(-2.0 * log(philoxUnitNonZero(a)));
  const float theta = kPi * (2.0 * philoxUnit(b) - 1.0);
  return r * vec2(cos(theta), sin(theta));
}

// The four normals of counter block `block` of a stream.
vec4 normalBlock(uvec4 state, uint stream, uint block) {
  const uvec4 bits = philoxBlock(state, stream, block);
  return vec4(boxMuller(bits.x, bits.y), boxMuller(bits.z, bits.w));
}

#endif  // VKGRAD_COMMON_NORMAL_GLSL
