#version 450
#extension GL_GOOGLE_include_directive : require
// dx[plane, iy, ix] (=|+=) Σ dy / count over the windows that hold the pixel, count as the
// forward divided by: one invocation per input pixel, windows in row-major order, so one
// writer per element and no atomics. dy and dx in any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kIncludePad = true;
layout(constant_id = 2) const bool kAccumulate = false;

FLOATS(0, dy, readonly)  // (N,C,OH,OW), skip_a
FLOATS(1, dx, )          // (N,C,H,W), skip_b; read only to accumulate

#include "pool2d/window.glsl"

// Pixels of window o inside the image along an axis of size n.
uint inside(uint o, uint k, uint s, uint pad, uint n) {
  const int a = int(o * s) - int(pad);
  return uint(min(a + int(k), int(n)) - max(a, 0));
}

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint ix = e % p.width, r = e / p.width, iy = r % p.height, plane = r / p.height;
    const uint base = p.skip_a + plane * p.out_h * p.out_w;
    uint oy0, oy1, ox0, ox1;
    windowsOver(iy, p.kernel_h, p.stride_h, p.pad_h, p.out_h, oy0, oy1);
    windowsOver(ix, p.kernel_w, p.stride_w, p.pad_w, p.out_w, ox0, ox1);
    float sum = 0.0;
    for (uint oy = oy0; oy <= oy1; ++oy)
      for (uint ox = ox0; ox <= ox1; ++ox) {
        const uint count =
            kIncludePad ? p.kernel_h * p.kernel_w
                        : inside(oy, p.kernel_h, p.stride_h, p.pad_h, p.height) *
                              inside(ox, p.kernel_w, p.stride_w, p.pad_w, p.width);
        sum += LOAD(dy, base + oy * p.out_w + ox) / float(count);
      }
    const uint to = p.skip_b + e;
    STORE(dx, to, kAccumulate ? LOAD(dx, to) + sum : sum);
  }
}
