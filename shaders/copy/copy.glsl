// Body of copy/copy.comp (storage-buffer reads: any device, any 4-byte offset) and
// copy/copy_texel.comp (RGBA32F texel fetches, four words at a time): dst = src, 32-bit
// words. The plain kernel the bandwidth-bound ops are measured against (vkgrad-bench).

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
  uint n;                   // 32-bit words
  uint src_skip, dst_skip;  // first words inside the bindings (src_skip % 4 == 0 for texels)
} p;

#if COPY_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer src_tex;  // RGBA32F over (n)
#else
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };  // (n)
#endif
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };  // (n)

void main() {
  // Grid-stride (the host caps the workgroup count); the loop condition is also the bounds
  // guard for the grid rounded up to whole workgroups.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#if COPY_TEXEL
  for (uint t = gl_GlobalInvocationID.x; t < (p.n + 3) / 4; t += stride) {
    // A float fetch may flush denormals on some devices, so the host takes this path for
    // f32 tensors only; u32 words always go through copy.comp.
    const uvec4 v = floatBitsToUint(texelFetch(src_tex, int(p.src_skip / 4 + t)));
    const uint e = 4 * t, at = p.dst_skip + e;
    if (e + 4 <= p.n) {
      dst[at] = v.x, dst[at + 1] = v.y, dst[at + 2] = v.z, dst[at + 3] = v.w;
    } else {
      for (uint c = 0; c < 4; ++c)  // the last texel reaches past n
        if (e + c < p.n) dst[at + c] = v[c];
    }
  }
#else
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) dst[p.dst_skip + i] = src[p.src_skip + i];
#endif
}
