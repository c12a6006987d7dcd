#version 450
#extension GL_GOOGLE_include_directive : require
// dx[n, g·Cg + c, iy, ix] (=|+=) Σ dcols[g, n·P + q, (c·KH + ky)·KW + kx] over the taps (ky, kx)
// of the output pixels q that read (iy, ix): im2col's backward. One invocation per input
// pixel, which sums its own taps in a fixed order, so there is one writer per element and no
// atomics. dx in any float format (common/storage.glsl); dcols f32.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

FLOATS(0, dcols, readonly)  // (G, images·P, K), skip_a
FLOATS(1, dx, )             // (images,C,H,W), skip_b; read only to accumulate

#include "conv2d/geometry.glsl"

void main() {
  const uint cg = groupChannels(), taps_ = taps(), pixels = outPixels();
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint ix = e % p.width, r = e / p.width, iy = r % p.height, nc = r / p.height;
    const uint ci = nc % p.channels, n = nc / p.channels, g = ci / cg, c = ci - g * cg;
    const uint base = (g * p.images + n) * pixels;  // the group's first row of this image
    float sum = 0.0;
    for (uint ky = 0; ky < p.kernel_h; ++ky) {
      // oy·sh = iy + pt - ky·dh: a tap reaches this row only from a whole, in-range oy.
      const int ty = int(iy + p.pad_top) - int(ky * p.dilation_h);
      if (ty < 0 || uint(ty) % p.stride_h != 0u) continue;
      const uint oy = uint(ty) / p.stride_h;
      if (oy >= p.out_h) continue;  // the tap lies past the last output row
      for (uint kx = 0; kx < p.kernel_w; ++kx) {
        const int tx = int(ix + p.pad_left) - int(kx * p.dilation_w);
        if (tx < 0 || uint(tx) % p.stride_w != 0u) continue;
        const uint ox = uint(tx) / p.stride_w;
        if (ox >= p.out_w) continue;  // past the last output column
        const uint k = (c * p.kernel_h + ky) * p.kernel_w + kx;
        sum += LOAD(dcols, p.skip_a + (base + oy * p.out_w + ox) * taps_ + k);
      }
    }
    const uint to = p.skip_b + e;
    STORE(dx, to, kAccumulate ? LOAD(dx, to) + sum : sum);
  }
}
