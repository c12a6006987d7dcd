#version 450
#extension GL_GOOGLE_include_directive : require
// patches[b, q, k] = images[b, pixel k of patch q]: one invocation per patch element,
// grid-stride; contiguous stores, reads in runs of `patch` pixels (patchify/index.glsl).
// Either tensor in any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, images, readonly)    // (B,H,W)
FLOATS(1, patches, writeonly)  // (B,P,patch*patch)

#include "patchify/index.glsl"

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    STORE(patches, p.patches_skip + e, LOAD(images, p.images_skip + imageIndex(e)));
}
