#version 450
#extension GL_GOOGLE_include_directive : require
// y[b, oy, ox] = x[b, oy - top, ox - left] inside, the fill outside (kReflect: the mirrored
// element instead, pad/index.glsl). One invocation per output element, grid-stride; x and y
// in any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kReflect = false;

FLOATS(0, x, readonly)   // (B,H,W)
FLOATS(1, y, writeonly)  // (B,Ho,Wo)

#include "pad/index.glsl"

void main() {
  // The loop condition is the bounds guard for the grid rounded up to whole workgroups.
  for (uint e = gl_GlobalInvocationID.x; e < p.count;
       e += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint plane = p.ho * p.wo, b = e / plane, r = e - b * plane;
    const uint oy = r / p.wo, ox = r - oy * p.wo;
    int iy = int(oy) - int(p.top), ix = int(ox) - int(p.left);
    float v;
    if (kReflect) {
      iy = reflectIndex(iy, int(p.h));
      ix = reflectIndex(ix, int(p.w));
      v = LOAD(x, p.x_skip + (b * p.h + uint(iy)) * p.w + uint(ix));
    } else if (iy >= 0 && iy < int(p.h) && ix >= 0 && ix < int(p.w)) {  // inside x
      v = LOAD(x, p.x_skip + (b * p.h + uint(iy)) * p.w + uint(ix));
    } else {
      v = p.value;
    }
    STORE(y, p.y_skip + e, v);
  }
}
