#version 450
// dst = src with its axes permuted (up to 4): one invocation per dst element, in dst order,
// reading src through the strides of the axes each dst axis came from. 32-bit words.
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };

layout(push_constant) uniform Push {
  uint n;                   // elements
  uint src_skip, dst_skip;  // first words inside the bindings
  uint dims[4];             // dst shape, padded with leading 1s to 4 axes
  uint strides[4];          // src stride (in words) of the axis each dst axis came from
} p;

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint e = gl_GlobalInvocationID.x; e < p.n; e += stride) {
    uint rest = e, from = p.src_skip;
    for (int a = 3; a >= 0; --a) {
      from += (rest % p.dims[a]) * p.strides[a];
      rest /= p.dims[a];
    }
    dst[p.dst_skip + e] = src[from];
  }
}
