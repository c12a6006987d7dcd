#version 450
#extension GL_GOOGLE_include_directive : require
// Stage 1 of the global gradient norm over many gradients in one dispatch; see
// optimizer/sumsq_texel.glsl.
#define SUMSQ_MANY 1
#include "optimizer/sumsq_texel.glsl"
