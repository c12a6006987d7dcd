#version 450
// spmm's gather, one feature per invocation (any F, any offsets): see aggregate.glsl.
#extension GL_GOOGLE_include_directive : require
#define VEC float
#define WIDTH 1u
#include "spmm/aggregate.glsl"
