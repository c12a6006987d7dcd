#version 450
// alpha[e, h] = softmax over destination j's incoming edges e in [offsets[j], offsets[j+1])
// of scores[e, h], per head h (ops/edge_softmax.h). One workgroup per node, grid-striding
// over nodes; each lane takes a strided slice of the node's edges and keeps an online
// (max, sum) pair (common/online_softmax.glsl), combined in a fixed order
// (common/reduce.glsl): the same bits every run, no atomics. Heads run one after another so
// that a node's edge range is read from memory once per head, not once per lane and head.
// scores and alpha in any float format; the max, the sum and the exponentials are f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kOneSubgroup = false;

#include "common/reduce.glsl"

layout(set = 0, binding = 0) readonly buffer Offsets { uint offsets[]; };  // (nodes + 1)
FLOATS(1, scores, readonly)  // (E, H)
FLOATS(2, alpha, writeonly)  // (E, H)
layout(push_constant) uniform Push {
  uint nodes, edges, heads;
  uint offsets_skip, scores_skip, alpha_skip;  // first elements inside the bindings
} p;

void main() {
  // j and h depend only on the workgroup, so the reductions' barriers stay uniform.
  for (uint j = gl_WorkGroupID.x; j < p.nodes; j += gl_NumWorkGroups.x) {
    // Clamped: offsets are device data the host never saw (see the header).
    const uint begin = min(offsets[p.offsets_skip + j], p.edges);
    const uint end = max(begin, min(offsets[p.offsets_skip + j + 1], p.edges));
    for (uint h = 0; h < p.heads; ++h) {
      MaxSumAcc acc = kMaxSumAccEmpty;
      for (uint e = begin + gl_LocalInvocationID.x; e < end; e += gl_WorkGroupSize.x)
        acc = maxSumAccAdd(acc, LOAD(scores, p.scores_skip + e * p.heads + h));
      const MaxSum stats = workgroupMaxSum(maxSumAccResult(acc));
      // All -inf: zeros rather than exp(-inf + inf) / 0 = NaN (as ops/softmax.h).
      const float inv_sum = stats.m == kNegInf ? 0.0 : 1.0 / stats.s;
      for (uint e = begin + gl_LocalInvocationID.x; e < end; e += gl_WorkGroupSize.x) {
        const uint i = e * p.heads + h;
        const float s = LOAD(scores, p.scores_skip + i);
        STORE(alpha, p.alpha_skip + i, stats.m == kNegInf ? 0.0 : exp(s - stats.m) * inv_sum);
      }
    }
  }
}
