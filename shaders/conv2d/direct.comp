#version 450
#extension GL_GOOGLE_include_directive : require
// The forward as one direct kernel: y[n, o, q] = bias[o] + Σ_{c, ky, kx} w[o, c, ky, kx] ·
// x[n, g·Cg + c, iy, ix], one invocation per output, grid-stride. No scratch, one dispatch;
// the benchmark's alternative to im2col + matmul (BENCHMARKS.md). x and y in any float format
// (common/storage.glsl); w and bias f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kBias = false;

FLOATS(0, x, readonly)   // (N,C,H,W), skip_a
FLOATS(1, w, readonly)   // (O,Cg,KH,KW), skip_b
FLOATS(2, bias, readonly)  // (O), skip_d; a dummy binding without kBias
FLOATS(3, y, writeonly)  // (N,O,OH,OW), skip_c

#include "conv2d/geometry.glsl"

void main() {
  const uint pixels = outPixels(), cg = groupChannels(), og = groupOuts();
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint q = e % pixels, no = e / pixels, o = no % p.outs, n = no / p.outs;
    const uint oy = q / p.out_w, ox = q - oy * p.out_w, g = o / og;
    float sum = 0.0;
    for (uint c = 0; c < cg; ++c) {
      const uint plane = p.skip_a + (n * p.channels + g * cg + c) * p.height * p.width;
      const uint taps_at = p.skip_b + (o * cg + c) * p.kernel_h * p.kernel_w;
      for (uint ky = 0; ky < p.kernel_h; ++ky) {
        const int iy = inputRow(oy, ky);
        if (iy < 0 || iy >= int(p.height)) continue;  // padding rows add nothing
        for (uint kx = 0; kx < p.kernel_w; ++kx) {
          const int ix = inputCol(ox, kx);
          if (ix < 0 || ix >= int(p.width)) continue;  // padding columns add nothing
          sum += LOAD(w, taps_at + ky * p.kernel_w + kx) *
                 LOAD(x, plane + uint(iy) * p.width + uint(ix));
        }
      }
    }
    if (kBias) sum += LOAD(bias, p.skip_d + o);
    STORE(y, p.skip_c + e, sum);
  }
}
