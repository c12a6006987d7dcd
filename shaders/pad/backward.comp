#version 450
#extension GL_GOOGLE_include_directive : require
// pad's backward as a gather: dx[b, iy, ix] (=|+=) the sum of dy over the outputs that copied
// x[b, iy, ix]. Constant: the one output top + iy, left + ix. Reflect: along each axis the
// element itself and its mirror images in the padding, before (at top - iy, for
// 1 <= iy <= top) and after (at top + 2(H - 1) - iy, for H - 1 - bottom <= iy <= H - 2);
// the up to 3 x 3 products are summed in a fixed order, so no atomics and the same bits every
// run. One invocation per element of dx, grid-stride; any float formats, f32 arithmetic.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kReflect = false;
layout(constant_id = 2) const bool kAccumulate = false;

FLOATS(0, dx, )          // (B,H,W), at x_skip; read only to accumulate
FLOATS(1, dy, readonly)  // (B,Ho,Wo), at y_skip

#include "pad/index.glsl"

// The output positions along one axis (n long, `before` added in front, `padded` long after
// padding) whose value is element i: up to three, -1 where there is none.
ivec3 sources(int i, int n, int before, int padded, bool reflect) {
  ivec3 o = ivec3(i + before, -1, -1);
  if (reflect) {
    if (i >= 1 && i <= before) o.y = before - i;
    const int mirrored = before + 2 * (n - 1) - i;
    if (i <= n - 2 && mirrored < padded) o.z = mirrored;
  }
  return o;
}

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.count;
       e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint plane = p.h * p.w, b = e / plane, r = e - b * plane;
    const uint iy = r / p.w, ix = r - iy * p.w;
    const ivec3 ys = sources(int(iy), int(p.h), int(p.top), int(p.ho), kReflect);
    const ivec3 xs = sources(int(ix), int(p.w), int(p.left), int(p.wo), kReflect);
    float sum = 0.0;
    for (int a = 0; a < 3; ++a) {
      if (ys[a] < 0) continue;  // no such mirror image
      for (int c = 0; c < 3; ++c) {
        if (xs[c] < 0) continue;
        sum += LOAD(dy, p.y_skip + (b * p.ho + uint(ys[a])) * p.wo + uint(xs[c]));
      }
    }
    const uint at = p.x_skip + e;
    STORE(dx, at, kAccumulate ? LOAD(dx, at) + sum : sum);
  }
}
