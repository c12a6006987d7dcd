#version 450
#extension GL_GOOGLE_include_directive : require
// AdamW over many tensors in one dispatch, texel fetches and 16-byte stores (the texel
// kernel's loop per tensor); see optimizer/adamw.glsl.
#define ADAMW_TEXEL 1
#define ADAMW_SPLIT 0
#define ADAMW_MANY 1
#include "optimizer/adamw.glsl"
