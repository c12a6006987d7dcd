#version 450
#extension GL_GOOGLE_include_directive : require
// y[n, o, q] = rows[g, n·P + q, o - g·Og] + bias[o]: the product back in NCHW order. One
// invocation per element of y, grid-stride, contiguous stores. y in any float format
// (common/storage.glsl); rows and bias f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kBias = false;

FLOATS(0, rows, readonly)  // (G, images·P, Og), skip_a
FLOATS(1, bias, readonly)  // (O), skip_b; a dummy binding without kBias
FLOATS(2, y, writeonly)    // (images,O,OH,OW), skip_c

#include "conv2d/geometry.glsl"

void main() {
  const uint pixels = outPixels(), og = groupOuts();
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint q = e % pixels, no = e / pixels, o = no % p.outs, n = no / p.outs;
    const uint g = o / og;
    float v = LOAD(rows, p.skip_a + ((g * p.images + n) * pixels + q) * og + (o - g * og));
    if (kBias) v += LOAD(bias, p.skip_b + o);
    STORE(y, p.skip_c + e, v);
  }
}
