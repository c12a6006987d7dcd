#version 450
// dscores[e, h] (= or +=) alpha[e, h] (dalpha[e, h] - sum over e' of alpha[e', h] dalpha[e', h]),
// e' over the incoming edges of e's destination (ops/edge_softmax.h). The layout of
// forward.comp: one workgroup per node, lanes over its edges, Kahan sums per lane and a
// fixed-order workgroup combine, heads one after another. alpha, dalpha and dscores in any
// float format; the dot product is f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kOneSubgroup = false;
layout(constant_id = 2) const bool kAccumulate = false;

#include "common/kahan.glsl"
#include "common/reduce.glsl"

layout(set = 0, binding = 0) readonly buffer Offsets { uint offsets[]; };  // (nodes + 1)
FLOATS(1, alpha, readonly)   // (E, H)
FLOATS(2, dalpha, readonly)  // (E, H)
FLOATS(3, dscores, )         // (E, H); read to accumulate
layout(push_constant) uniform Push {
  uint nodes, edges, heads;
  uint offsets_skip, alpha_skip, dalpha_skip, dscores_skip;
} p;

void main() {
  // j and h depend only on the workgroup, so the reductions' barriers stay uniform.
  for (uint j = gl_WorkGroupID.x; j < p.nodes; j += gl_NumWorkGroups.x) {
    // Clamped: offsets are device data the host never saw (see the header).
    const uint begin = min(offsets[p.offsets_skip + j], p.edges);
    const uint end = max(begin, min(offsets[p.offsets_skip + j + 1], p.edges));
    for (uint h = 0; h < p.heads; ++h) {
      Kahan dot = kKahanZero;
      for (uint e = begin + gl_LocalInvocationID.x; e < end; e += gl_WorkGroupSize.x) {
        const uint i = e * p.heads + h;
        dot = kahanAdd(dot, LOAD(alpha, p.alpha_skip + i) * LOAD(dalpha, p.dalpha_skip + i));
      }
      const float total = workgroupSum(kahanValue(dot));
      for (uint e = begin + gl_LocalInvocationID.x; e < end; e += gl_WorkGroupSize.x) {
        const uint i = e * p.heads + h;
        float d = LOAD(alpha, p.alpha_skip + i) * (LOAD(dalpha, p.dalpha_skip + i) - total);
        if (kAccumulate) d += LOAD(dscores, p.dscores_skip + i);
        STORE(dscores, p.dscores_skip + i, d);
      }
    }
  }
}
