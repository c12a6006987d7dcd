#version 450
#extension GL_GOOGLE_include_directive : require
// reduce/sum.glsl through storage buffers, one float per load: any device, any offset.
#define EW_TEXEL 0
#include "reduce/sum.glsl"
