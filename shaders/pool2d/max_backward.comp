#version 450
#extension GL_GOOGLE_include_directive : require
// dx[plane, iy, ix] (=|+=) Σ dy over the windows that hold the pixel and chose it (argmax):
// one invocation per input pixel, the windows in row-major order, so one writer per element
// and no atomics. dy and dx in any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

FLOATS(0, dy, readonly)  // (N,C,OH,OW), skip_a
layout(set = 0, binding = 1) readonly buffer ArgmaxBuf { uint argmax[]; };  // as dy, skip_c
FLOATS(2, dx, )  // (N,C,H,W), skip_b; read only to accumulate

#include "pool2d/window.glsl"

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint ix = e % p.width, r = e / p.width, iy = r % p.height, plane = r / p.height;
    const uint self = iy * p.width + ix, base = plane * p.out_h * p.out_w;
    uint oy0, oy1, ox0, ox1;
    windowsOver(iy, p.kernel_h, p.stride_h, p.pad_h, p.out_h, oy0, oy1);
    windowsOver(ix, p.kernel_w, p.stride_w, p.pad_w, p.out_w, ox0, ox1);
    float sum = 0.0;
    for (uint oy = oy0; oy <= oy1; ++oy)
      for (uint ox = ox0; ox <= ox1; ++ox) {
        const uint o = base + oy * p.out_w + ox;
        if (argmax[p.skip_c + o] == self) sum += LOAD(dy, p.skip_a + o);
      }
    const uint to = p.skip_b + e;
    STORE(dx, to, kAccumulate ? LOAD(dx, to) + sum : sum);
  }
}
