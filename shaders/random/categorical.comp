#version 450
// Draws one index per row of non-negative weights (R,V) (probabilities, or unnormalised
// ones): out[r] = the first j with w[r,0] + ... + w[r,j] > u_r * sum_j w[r,j], u_r in [0, 1)
// from stream word r. One invocation walks a whole row, in a fixed order, so the draw is
// deterministic; rows are short next to the work that produced them (a softmax).
#extension GL_GOOGLE_include_directive : require
#include "common/philox.glsl"
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer W { float w[]; };         // (R,V)
layout(set = 0, binding = 1) writeonly buffer Out { uint out_ids[]; };  // (R) u32
layout(set = 0, binding = 2) readonly buffer Rng { uint rng[]; };
layout(push_constant) uniform Push { uint rows, cols, stream; } p;

void main() {
  const uvec4 state = uvec4(rng[0], rng[1], rng[2], rng[3]);
  for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint base = r * p.cols;
    float total = 0.0;
    for (uint j = 0; j < p.cols; ++j) total += max(w[base + j], 0.0);
    const float target = philoxUnit(philoxBlock(state, p.stream, r / 4)[r % 4]) * total;
    // Rounding can leave the running sum at or below target when u_r is close to 1; the
    // last positive weight then wins, and an all-zero row gives 0.
    uint pick = 0;
    float sum = 0.0;
    for (uint j = 0; j < p.cols; ++j) {
      const float wj = max(w[base + j], 0.0);
      if (wj <= 0.0) continue;
      sum += wj;
      pick = j;
      if (sum > target) break;
    }
    out_ids[r] = pick;
  }
}
