#version 450
#extension GL_GOOGLE_include_directive : require
// cols[g, n·P + q, k] = x[n, g·Cg + c, iy, ix] or 0 in padding (conv2d/geometry.glsl): one
// invocation per row of cols (an output pixel's taps), grid-stride; x read in runs along kx.
// x in any float format (common/storage.glsl); cols is f32 scratch.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, x, readonly)      // (images,C,H,W), skip_a
FLOATS(1, cols, writeonly)  // (G, images·P, K), skip_b

#include "conv2d/geometry.glsl"

void main() {
  const uint taps_ = taps(), pixels = outPixels(), cg = groupChannels();
  const uint rows = p.n / taps_;  // G·images·P rows of taps_ elements
  // One invocation per row: its output pixel's divisions once, then the taps in order with
  // no division (integer division is what made an invocation per element slow on lavapipe).
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint row = gl_GlobalInvocationID.x; row < rows;
       row += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint q = row % pixels, gn = row / pixels, n = gn % p.images, g = gn / p.images;
    const uint oy = q / p.out_w, ox = q - oy * p.out_w;
    const int y0 = inputRow(oy, 0), x0 = inputCol(ox, 0);
    uint to = p.skip_b + row * taps_;
    uint plane = p.skip_a + (n * p.channels + g * cg) * p.height * p.width;
    for (uint c = 0; c < cg; ++c, plane += p.height * p.width)
      for (uint ky = 0; ky < p.kernel_h; ++ky) {
        const int iy = y0 + int(ky * p.dilation_h);
        // Padding rows read as zero: the guard keeps the read inside the image.
        const bool row_in = iy >= 0 && iy < int(p.height);
        for (uint kx = 0; kx < p.kernel_w; ++kx, ++to) {
          const int ix = x0 + int(kx * p.dilation_w);
          float v = 0.0;
          if (row_in && ix >= 0 && ix < int(p.width))  // and padding columns too
            v = LOAD(x, plane + uint(iy) * p.width + uint(ix));
          STORE(cols, to, v);
        }
      }
  }
}
