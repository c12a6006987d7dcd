#version 450
// spmm's gather, one feature per invocation (any F, any offsets, x, y and the weights in any
// float format): see aggregate.glsl.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#define SPMM_WIDTH 1
#include "spmm/aggregate.glsl"
