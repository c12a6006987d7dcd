#version 450
// out[g, f] = sum, mean or max of x[n, f] over graph g's nodes n in [segments[g],
// segments[g+1]) (ops/segment_pool.h). One invocation per (g, f), grid-striding: neighbouring
// invocations read neighbouring features of the same node, and each sums its nodes in node
// order (Kahan), so the result is the same bits every run. x and out in any float format;
// the sum and the comparisons are f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;  // 0 Sum, 1 Mean, 2 Max

#include "common/kahan.glsl"

const uint kNoNode = 0xffffffffu;

FLOATS(0, x, readonly)  // (N, F)
layout(set = 0, binding = 1) readonly buffer Segments { uint segments[]; };  // (G + 1)
FLOATS(2, out_values, writeonly)  // (G, F)
layout(set = 0, binding = 3) writeonly buffer Argmax { uint argmax[]; };     // (G, F); Max only
layout(push_constant) uniform Push {
  uint nodes, graphs, features;
  uint x_skip, segments_skip, out_skip, argmax_skip;
} p;

void main() {
  const uint n_out = p.graphs * p.features;
  for (uint i = gl_GlobalInvocationID.x; i < n_out; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint g = i / p.features, f = i % p.features;
    // Clamped: segments are device data the host never saw (see the header).
    const uint begin = min(segments[p.segments_skip + g], p.nodes);
    const uint end = max(begin, min(segments[p.segments_skip + g + 1], p.nodes));
    if (KIND == 2u) {
      float best = 0.0;  // the max of nothing
      uint at = kNoNode;
      for (uint n = begin; n < end; ++n) {
        const float v = LOAD(x, p.x_skip + n * p.features + f);
        // The first node, then a strictly larger value or the first NaN; nothing beats a NaN.
        if (at == kNoNode || (!isnan(best) && (v > best || isnan(v)))) {
          best = v;
          at = n;
        }
      }
      STORE(out_values, p.out_skip + i, best);
      argmax[p.argmax_skip + i] = at;
    } else {
      Kahan sum = kKahanZero;
      for (uint n = begin; n < end; ++n)
        sum = kahanAdd(sum, LOAD(x, p.x_skip + n * p.features + f));
      float v = kahanValue(sum);
      if (KIND == 1u && end > begin) v /= float(end - begin);
      STORE(out_values, p.out_skip + i, v);
    }
  }
}
