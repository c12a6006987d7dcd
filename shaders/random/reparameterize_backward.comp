#version 450
// The gradient of z = mu + exp(log_sigma) * eps with respect to log_sigma:
//   dlog_sigma[i] (= or +=) dz[i] * ewExp(log_sigma[i]) * eps_i
// with eps drawn again from the forward pass's state and stream (mu's gradient is dz itself,
// passed on by the graph without a kernel of its own). Every tensor in any float format
// (common/storage.glsl): f32 arithmetic, dlog_sigma rounded once as stored.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/ew_math.glsl"
#include "common/normal.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

FLOATS(0, dz, readonly)         // (n)
FLOATS(1, log_sigma, readonly)  // (n)
FLOATS(2, dlog_sigma, )         // (n); read to accumulate
layout(set = 0, binding = 3) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push {
  uint n, stream;
  uint skip[3];  // first elements of dz, log_sigma, dlog_sigma inside their bindings
} p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const vec4 eps = normalBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k) {
      const uint i = 4 * b + k;
      if (i >= p.n) break;
      const float d = LOAD(dz, p.skip[0] + i) * ewExp(LOAD(log_sigma, p.skip[1] + i)) * eps[k];
      const uint to = p.skip[2] + i;
      STORE(dlog_sigma, to, kAccumulate ? LOAD(dlog_sigma, to) + d : d);
    }
  }
}
