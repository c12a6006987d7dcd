#version 450
#extension GL_GOOGLE_include_directive : require
// AdamW through storage buffers, one float per step: any device; see optimizer/adamw.glsl.
#define ADAMW_TEXEL 0
#define ADAMW_MANY 0
// The ".sb4" build, for a device that binds at most 4 storage buffers per stage: the update in
// two passes (ADAMW_SPLIT in optimizer/adamw.glsl).
#ifdef FOUR_STORAGE_BUFFERS
#define ADAMW_SPLIT 1
#else
#define ADAMW_SPLIT 0
#endif
#include "optimizer/adamw.glsl"
