#version 450
#extension GL_GOOGLE_include_directive : require
// y = the mean of each window: its pixels inside the image summed, divided by KH·KW
// (kIncludePad) or by how many there are. One invocation per output, grid-stride. x and y in
// any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kIncludePad = true;

FLOATS(0, x, readonly)   // (N,C,H,W), skip_a
FLOATS(1, y, writeonly)  // (N,C,OH,OW), skip_b

#include "pool2d/window.glsl"

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint ox = e % p.out_w, r = e / p.out_w, oy = r % p.out_h, plane = r / p.out_h;
    const uint base = p.skip_a + plane * p.height * p.width;
    const int y0 = int(oy * p.stride_h) - int(p.pad_h), x0 = int(ox * p.stride_w) - int(p.pad_w);
    const uint ya = uint(max(y0, 0)), yb = uint(min(y0 + int(p.kernel_h), int(p.height)));
    const uint xa = uint(max(x0, 0)), xb = uint(min(x0 + int(p.kernel_w), int(p.width)));
    float sum = 0.0;
    for (uint iy = ya; iy < yb; ++iy)
      for (uint ix = xa; ix < xb; ++ix) sum += LOAD(x, base + iy * p.width + ix);
    const uint count = kIncludePad ? p.kernel_h * p.kernel_w : (yb - ya) * (xb - xa);
    STORE(y, p.skip_b + e, sum / float(count));
  }
}
