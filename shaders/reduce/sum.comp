#version 450
#extension GL_GOOGLE_include_directive : require
// reduce/sum.glsl through storage buffers, one element per load: any device, any offset, x, y
// and out in any float format.
#include "common/storage.glsl"
#define EW_TEXEL 0
#include "reduce/sum.glsl"
