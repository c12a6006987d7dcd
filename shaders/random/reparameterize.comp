#version 450
// The reparameterisation of a VAE: z[i] = mu[i] + ewExp(log_sigma[i]) * eps_i, eps_i element i
// of the stream's standard normals (common/normal.glsl, the values random/normal draws).
// eps is never stored: reparameterize_backward draws it again from the same state. Every
// tensor in any float format (common/storage.glsl): f32 arithmetic, z rounded once as stored.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/ew_math.glsl"
#include "common/normal.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, mu, readonly)         // (n)
FLOATS(1, log_sigma, readonly)  // (n)
FLOATS(2, z, writeonly)         // (n)
layout(set = 0, binding = 3) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push {
  uint n, stream;
  uint skip[3];  // first elements of mu, log_sigma, z inside their bindings (ops/binding.h)
} p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const vec4 eps = normalBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k) {
      const uint i = 4 * b + k;
      if (i >= p.n) break;  // the last block may be partial
      STORE(z, p.skip[2] + i,
            LOAD(mu, p.skip[0] + i) + ewExp(LOAD(log_sigma, p.skip[1] + i)) * eps[k]);
    }
  }
}
