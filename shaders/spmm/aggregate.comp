#version 450
// spmm's gather, one feature per invocation (any F, any offsets, x, y and the weights in any
// float format): see aggregate.glsl.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"
// The index arrays: storage buffers, or texel views in the ".sb4" build (a device that binds
// at most 4 storage buffers per stage).
UINTS_OR_TEXELS(0, offsets)   // (rows + 1)
UINTS_OR_TEXELS(1, nodes)     // (E)
UINTS_OR_TEXELS(2, edge_ids)  // (E)
#define SPMM_WIDTH 1
#include "spmm/aggregate.glsl"
