#version 450
#extension GL_GOOGLE_include_directive : require
// dst = src through storage buffers; see copy/copy.glsl. Its ".s16" build copies 16-bit
// elements (two views of one 16-bit dtype) as raw bits.
#include "common/storage.glsl"
#define COPY_TEXEL 0
#include "copy/copy.glsl"
