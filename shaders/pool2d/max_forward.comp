#version 450
#extension GL_GOOGLE_include_directive : require
// y = the largest pixel of each window inside the image, argmax = its index iy·W + ix in the
// plane (the first, row-major, among equals): one invocation per output, grid-stride. x and
// y in any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

FLOATS(0, x, readonly)  // (N,C,H,W), skip_a
FLOATS(1, y, writeonly)  // (N,C,OH,OW), skip_b
layout(set = 0, binding = 2) writeonly buffer ArgmaxBuf { uint argmax[]; };  // as y, skip_c

#include "pool2d/window.glsl"

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint ox = e % p.out_w, r = e / p.out_w, oy = r % p.out_h, plane = r / p.out_h;
    const uint base = p.skip_a + plane * p.height * p.width;
    // The window clipped to the image; padding at most half the kernel leaves it non-empty.
    const int y0 = int(oy * p.stride_h) - int(p.pad_h), x0 = int(ox * p.stride_w) - int(p.pad_w);
    const uint ya = uint(max(y0, 0)), yb = uint(min(y0 + int(p.kernel_h), int(p.height)));
    const uint xa = uint(max(x0, 0)), xb = uint(min(x0 + int(p.kernel_w), int(p.width)));
    uint best = ya * p.width + xa;
    float top = LOAD(x, base + best);
    for (uint iy = ya; iy < yb; ++iy)
      for (uint ix = xa; ix < xb; ++ix) {
        const float v = LOAD(x, base + iy * p.width + ix);
        // Strictly greater keeps the first maximum; a NaN wins, so it reaches the loss.
        if (v > top || (isnan(v) && !isnan(top))) {
          top = v;
          best = iy * p.width + ix;
        }
      }
    STORE(y, p.skip_b + e, top);
    argmax[p.skip_c + e] = best;
  }
}
