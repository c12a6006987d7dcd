// Body of copy/copy.comp (storage-buffer reads: any device, any 4-byte offset) and
// copy/copy_texel.comp (RGBA32F texel fetches and 16-byte stores, four words at a time):
// dst = src, 32-bit words (16-bit elements in copy.comp's STORAGE16 build: f16 or bf16 bits,
// copied unchanged, never rounded). The plain kernel the bandwidth-bound ops are measured against
// (vkgrad-bench). On lavapipe the texel kernel's loop must stay branch-free: a bounds branch
// around its store (for the last, partial texel) halves its rate, so that texel is written
// after the loop.

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
  uint n;                   // elements (32-bit words, or 16-bit values in STORAGE16)
  uint src_skip, dst_skip;  // first elements inside the bindings (both % 4 == 0 for texels)
} p;

#if COPY_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer src_tex;  // RGBA32F over (n)
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };  // (n)
#elif defined(STORAGE16)
FLOATS(0, src, readonly)   // (n) 16-bit, read as src_16
FLOATS(1, dst, writeonly)  // (n) 16-bit, written as dst_16
#else
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };   // (n)
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };  // (n)
#endif
#if COPY_TEXEL
// The same binding seen as 16-byte words: one vec4 store per texel (dst_skip % 4 == 0).
layout(set = 0, binding = 1) writeonly buffer Dst4 { uvec4 dst4[]; };
#endif

void main() {
  // Grid-stride (the host caps the workgroup count); the loop condition is also the bounds
  // guard for the grid rounded up to whole workgroups.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#if COPY_TEXEL
  // Whole texels: one 16-byte store each (dst_skip % 4 == 0 is the host's condition).
  for (uint t = gl_GlobalInvocationID.x; t < p.n / 4; t += stride)
    dst4[p.dst_skip / 4 + t] = floatBitsToUint(texelFetch(src_tex, int(p.src_skip / 4 + t)));
  // The last partial texel, by one invocation, outside the loop.
  if (gl_GlobalInvocationID.x == 0 && p.n % 4 != 0) {
    const uint t = p.n / 4;
    const uvec4 v = floatBitsToUint(texelFetch(src_tex, int(p.src_skip / 4 + t)));
    for (uint c = 0; c < p.n % 4; ++c) dst[p.dst_skip + 4 * t + c] = v[c];
  }
#elif defined(STORAGE16)
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    dst_16[p.dst_skip + i] = src_16[p.src_skip + i];
#else
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) dst[p.dst_skip + i] = src[p.src_skip + i];
#endif
}
