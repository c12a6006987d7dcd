// Included after common/storage.glsl by a kernel with small read-only inputs (a kernel with
// only UINTS_OR_TEXELS bindings needs no common/storage.glsl).
#ifndef COMMON_STORAGE_OR_TEXELS_GLSL
#define COMMON_STORAGE_OR_TEXELS_GLSL

// A small read-only input (a norm's gamma, a row's statistics) that a kernel's ".sb4" build
// (FOUR_STORAGE_BUFFERS, cmake/Shaders.cmake: a device that binds at most 4 storage buffers
// per stage) reads through a one-component uniform texel view instead of a storage buffer:
// uniform texel buffers count against maxPerStageDescriptorSampledImages (16 at least). The
// host binds it with ops::bindInput, which gives the same skip either way.
//   FLOATS_OR_TEXELS(3, gamma)    FLOATS(3, gamma, readonly), or TEXELS(3, gamma) in .sb4
//   LOAD_OR_FETCH(gamma, i)       element i as a float, from whichever it is
// The same for a read-only u32 array (a graph's offsets and edge lists), in either build:
//   UINTS_OR_TEXELS(0, offsets)         a readonly uint[], or an R32UI texel view in .sb4
//   LOAD_OR_FETCH_UINT(offsets, i)      element i as a uint
#ifdef FOUR_STORAGE_BUFFERS
#define FLOATS_OR_TEXELS(BINDING, NAME) TEXELS(BINDING, NAME)
#define LOAD_OR_FETCH(NAME, I) FETCH(NAME, int(I)).x
#define UINTS_OR_TEXELS(BINDING, NAME) \
  layout(set = 0, binding = BINDING) uniform usamplerBuffer NAME;
#define LOAD_OR_FETCH_UINT(NAME, I) texelFetch(NAME, int(I)).x
#else
#define FLOATS_OR_TEXELS(BINDING, NAME) FLOATS(BINDING, NAME, readonly)
#define LOAD_OR_FETCH(NAME, I) LOAD(NAME, I)
#define UINTS_OR_TEXELS(BINDING, NAME) \
  layout(set = 0, binding = BINDING) readonly buffer NAME##_u32 { uint NAME[]; };
#define LOAD_OR_FETCH_UINT(NAME, I) NAME[I]
#endif

#endif  // COMMON_STORAGE_OR_TEXELS_GLSL
