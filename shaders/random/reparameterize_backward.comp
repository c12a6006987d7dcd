#version 450
// The gradient of z = mu + exp(log_sigma) * eps with respect to log_sigma:
//   dlog_sigma[i] (= or +=) dz[i] * ewExp(log_sigma[i]) * eps_i
// with eps drawn again from the forward pass's state and stream (mu's gradient is dz itself,
// passed on by the graph without a kernel of its own).
#extension GL_GOOGLE_include_directive : require
#include "common/ew_math.glsl"
#include "common/normal.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

layout(set = 0, binding = 0) readonly buffer DZ { float dz[]; };              // (n)
layout(set = 0, binding = 1) readonly buffer LogSigma { float log_sigma[]; };  // (n)
layout(set = 0, binding = 2) buffer DLogSigma { float dlog_sigma[]; };  // (n); read to accumulate
layout(set = 0, binding = 3) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push { uint n, stream; } p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const vec4 eps = normalBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k) {
      const uint i = 4 * b + k;
      if (i >= p.n) break;
      const float d = dz[i] * ewExp(log_sigma[i]) * eps[k];
      if (kAccumulate) dlog_sigma[i] += d;
      else dlog_sigma[i] = d;
    }
  }
}
