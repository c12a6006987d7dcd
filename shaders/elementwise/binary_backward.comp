#version 450
#extension GL_GOOGLE_include_directive : require
// elementwise/binary_backward.glsl through storage buffers, one element per step: any device,
// any offset, every tensor in any float format.
#include "common/storage.glsl"
#define EW_TEXEL 0
// The ".sb4" build: one gradient per dispatch (EW_ONE_GRADIENT in the body).
#ifdef FOUR_STORAGE_BUFFERS
#define EW_ONE_GRADIENT 1
#else
#define EW_ONE_GRADIENT 0
#endif
#include "elementwise/binary_backward.glsl"
