#version 450
#extension GL_GOOGLE_include_directive : require
// rows[g, n·P + q, j] = dy[n, g·Og + j, q]: dy in the product's layout, for the backward's
// matmuls (scatter.comp's inverse, without the bias). One invocation per element of rows,
// grid-stride. dy in any float format (common/storage.glsl); rows f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, dy, readonly)     // (images,O,OH,OW), skip_a
FLOATS(1, rows, writeonly)  // (G, images·P, Og), skip_b

#include "conv2d/geometry.glsl"

void main() {
  const uint pixels = outPixels(), og = groupOuts();
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint j = e % og, row = e / og, q = row % pixels, gn = row / pixels;
    const uint n = gn % p.images, g = gn / p.images;
    STORE(rows, p.skip_b + e, LOAD(dy, p.skip_a + (n * p.outs + g * og + j) * pixels + q));
  }
}
