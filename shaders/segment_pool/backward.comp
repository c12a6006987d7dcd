#version 450
// dx[n, f] (= or +=) the gradient of segment pooling (ops/segment_pool.h) from dout (G, F):
// one invocation per (n, f) finds the graph that owns node n by binary search over the
// (clamped) segments, so every element of dx is written exactly once, with no atomics.
//   Sum: dout[g, f]; Mean: dout[g, f] / count; Max: dout[g, f] if argmax[g, f] == n, else 0.
// dout and dx in any float format; the arithmetic is f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;  // 0 Sum, 1 Mean, 2 Max
layout(constant_id = 2) const bool kAccumulate = false;

layout(set = 0, binding = 0) readonly buffer Segments { uint segments[]; };  // (G + 1)
layout(set = 0, binding = 1) readonly buffer Argmax { uint argmax[]; };      // (G, F); Max only
FLOATS(2, dout, readonly)  // (G, F)
FLOATS(3, dx, )            // (N, F); read to accumulate
layout(push_constant) uniform Push {
  uint nodes, graphs, features;
  uint segments_skip, argmax_skip, dout_skip, dx_skip;
} p;

uint start(uint g) { return min(segments[p.segments_skip + g], p.nodes); }

void main() {
  const uint n_dx = p.nodes * p.features;
  for (uint i = gl_GlobalInvocationID.x; i < n_dx; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint n = i / p.features, f = i % p.features;
    // The last graph g < G whose start is <= n: for non-decreasing segments the one holding
    // n if any. Bisection stays within [0, G] whatever the segments hold.
    uint lo = 0, hi = p.graphs;
    while (lo < hi) {
      const uint mid = (lo + hi) / 2;
      if (start(mid) <= n) lo = mid + 1;
      else hi = mid;
    }
    float d = 0.0;
    if (lo > 0) {
      const uint g = lo - 1;
      const uint begin = start(g), end = max(begin, start(g + 1));
      if (n < end) {  // else n lies after g's end: no graph owns it
        const uint o = g * p.features + f;
        d = LOAD(dout, p.dout_skip + o);
        if (KIND == 1u) d /= float(end - begin);
        if (KIND == 2u && argmax[p.argmax_skip + o] != n) d = 0.0;
      }
    }
    if (kAccumulate) d += LOAD(dx, p.dx_skip + i);
    STORE(dx, p.dx_skip + i, d);
  }
}
