#version 450
#extension GL_GOOGLE_include_directive : require
// dst = src with its axes permuted (up to 6): one invocation per dst element, in dst order,
// reading src through the strides of the axes each dst axis came from. 32-bit words here;
// the ".s16" build moves 16-bit elements (f16 or bf16, both views of one dtype) as raw bits,
// so a permute never rounds.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

#ifdef STORAGE16
FLOATS(0, src, readonly)
FLOATS(1, dst, writeonly)
#else
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
#endif

layout(push_constant) uniform Push {
  uint n;                   // elements
  uint src_skip, dst_skip;  // first elements inside the bindings
  uint dims[6];             // dst shape, padded with leading 1s to 6 axes
  uint strides[6];          // src stride (in elements) of the axis each dst axis came from
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    uint rest = e, from = p.src_skip;
    for (int a = 5; a >= 0; --a) {
      from += (rest % p.dims[a]) * p.strides[a];
      rest /= p.dims[a];
    }
#ifdef STORAGE16
    dst_16[p.dst_skip + e] = src_16[from];
#else
    dst[p.dst_skip + e] = src[from];
#endif
  }
}
