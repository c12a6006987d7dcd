#version 450
// Dropout forward and backward are the same map, y = x * mask / (1 - p), so one kernel
// serves both and the backward pass sees exactly the forward mask: element i is kept iff
// stream word i >= threshold (threshold = round(p * 2^32), computed on the host). x and y in
// any float format (common/storage.glsl): the draws do not depend on it, the product is f32,
// rounded once as y stores it.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/philox.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;  // y += instead of y =

FLOATS(0, x, readonly)  // (n): x, or dy in backward
FLOATS(1, y, )          // (n): y, or dx; read only to accumulate
layout(set = 0, binding = 2) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push {
  uint n, stream, threshold;
  float scale;
  uint x_skip, y_skip;  // first elements inside the bindings (ops/binding.h)
} p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  const uint blocks = (p.n + 3) / 4;
  for (uint b = gl_GlobalInvocationID.x; b < blocks; b += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uvec4 bits = philoxBlock(state, p.stream, b);
    for (uint k = 0; k < 4; ++k) {
      const uint i = 4 * b + k;
      if (i >= p.n) break;  // the last block may be partial
      const float v = bits[k] >= p.threshold ? LOAD(x, p.x_skip + i) * p.scale : 0.0;
      const uint to = p.y_skip + i;
      STORE(y, to, kAccumulate ? LOAD(y, to) + v : v);
    }
  }
}
