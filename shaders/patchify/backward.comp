#version 450
#extension GL_GOOGLE_include_directive : require
// Unpatchify, patchify's backward: dimages[b, pixel k of patch q] (=|+=) dpatches[b, q, k].
// One invocation per element, grid-stride; the map is a bijection, so each pixel has exactly
// one writer and accumulating needs no atomics. Either tensor in any float format
// (common/storage.glsl); an accumulation adds in f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

FLOATS(0, dimages, )           // (B,H,W); read only to accumulate
FLOATS(1, dpatches, readonly)  // (B,P,patch*patch)

#include "patchify/index.glsl"

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint to = p.images_skip + imageIndex(e);
    const float v = LOAD(dpatches, p.patches_skip + e);
    STORE(dimages, to, kAccumulate ? LOAD(dimages, to) + v : v);
  }
}
