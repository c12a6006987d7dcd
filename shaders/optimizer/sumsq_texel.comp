#version 450
#extension GL_GOOGLE_include_directive : require
// Stage 1 of the global gradient norm for one gradient, read as RGBA32F texels; see
// optimizer/sumsq_texel.glsl (optimizer/sumsq: any view, one float at a time).
#define SUMSQ_MANY 0
#include "optimizer/sumsq_texel.glsl"
