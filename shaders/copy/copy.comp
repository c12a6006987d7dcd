#version 450
#extension GL_GOOGLE_include_directive : require
// dst = src through storage buffers; see copy/copy.glsl.
#define COPY_TEXEL 0
#include "copy/copy.glsl"
