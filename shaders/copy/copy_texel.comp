#version 450
#extension GL_GOOGLE_include_directive : require
// dst = src with src fetched from an RGBA32F texel buffer; see copy/copy.glsl.
#define COPY_TEXEL 1
#include "copy/copy.glsl"
