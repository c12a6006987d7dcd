#version 450
#extension GL_GOOGLE_include_directive : require
// dst[dst strides . i] (= or +=) alpha * src[src strides . i] for every index i of a space of
// up to 6 axes: transposes (permuted strides), expands (stride 0), slices with steps
// (scaled strides and an offset), the pieces of a concat or a pad (dst strides of the larger
// tensor) and their gradients. One invocation per element of the space, in row-major order.
// The f32 build moves 32-bit words as bits unless it scales or accumulates (so u32 ids copy
// too); the ".s16" build reads and stores any float format (common/storage.glsl).
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool ACCUMULATE = false;
layout(constant_id = 2) const bool SCALED = false;  // multiply by alpha (floats only)

FLOATS(0, src, readonly)
FLOATS(1, dst, )  // not writeonly: ACCUMULATE reads it
layout(set = 0, binding = 0) readonly buffer SrcBits { uint src_bits[]; };
layout(set = 0, binding = 1) buffer DstBits { uint dst_bits[]; };

layout(push_constant) uniform Push {
  uint dims[6];         // the space, padded with leading 1s to 6 axes
  uint src_strides[6];  // elements
  uint dst_strides[6];
  uint src_start, dst_start;  // first elements inside the bindings (view skip + offset)
  uint n;                     // elements of the space
  float alpha;
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    uint rest = e, from = p.src_start, to = p.dst_start;
    for (int a = 5; a >= 0; --a) {
      const uint i = rest % p.dims[a];
      rest /= p.dims[a];
      from += i * p.src_strides[a];
      to += i * p.dst_strides[a];
    }
#ifndef STORAGE16
    if (!ACCUMULATE && !SCALED) {
      dst_bits[to] = src_bits[from];
      continue;
    }
#endif
    float v = LOAD(src, from);
    if (SCALED) v *= p.alpha;
    if (ACCUMULATE) v += LOAD(dst, to);
    STORE(dst, to, v);
  }
}
