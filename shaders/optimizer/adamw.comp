#version 450
#extension GL_GOOGLE_include_directive : require
// AdamW through storage buffers, one float per step: any device; see optimizer/adamw.glsl.
#define ADAMW_TEXEL 0
#define ADAMW_MANY 0
#include "optimizer/adamw.glsl"
