#version 450
#extension GL_GOOGLE_include_directive : require
// AdamW with texel fetches and 16-byte stores, four floats a step; see optimizer/adamw.glsl.
#define ADAMW_TEXEL 1
#define ADAMW_SPLIT 0
#define ADAMW_MANY 0
#include "optimizer/adamw.glsl"
