#version 450
#extension GL_GOOGLE_include_directive : require
// reduce/sum.glsl with its inputs fetched from texel buffers (RGBA32F when VEC4, else R32F);
// the host picks it when the views fit the device's texel-buffer limits.
#define EW_TEXEL 1
#include "reduce/sum.glsl"
