#version 450
#extension GL_GOOGLE_include_directive : require
// cols[g, n·P + q, k] = x[n, g·Cg + c, iy, ix] or 0 in padding (conv2d/geometry.glsl): one
// invocation per element of cols, grid-stride; contiguous stores, x read in runs along kx.
// x in any float format (common/storage.glsl); cols is f32 scratch.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, x, readonly)      // (images,C,H,W), skip_a
FLOATS(1, cols, writeonly)  // (G, images·P, K), skip_b

#include "conv2d/geometry.glsl"

void main() {
  const uint taps_ = taps(), pixels = outPixels(), kk = p.kernel_h * p.kernel_w;
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint k = e % taps_, row = e / taps_;  // row = g·images·P + n·P + q
    const uint q = row % pixels, gn = row / pixels, n = gn % p.images, g = gn / p.images;
    const uint c = k / kk, tap = k - c * kk, ky = tap / p.kernel_w, kx = tap - ky * p.kernel_w;
    const uint oy = q / p.out_w, ox = q - oy * p.out_w;
    const int iy = inputRow(oy, ky), ix = inputCol(ox, kx);
    float v = 0.0;
    // Padding reads as zero: the guard keeps the read inside the image.
    if (iy >= 0 && iy < int(p.height) && ix >= 0 && ix < int(p.width))
      v = LOAD(x, p.skip_a + ((n * p.channels + g * groupChannels() + c) * p.height + uint(iy)) *
                                 p.width + uint(ix));
    STORE(cols, p.skip_b + e, v);
  }
}
