#version 450
// spmm's gather, 4 features per invocation: for F and F / H multiples of 4 with x and y
// starting on 16 bytes of their bindings, and x, y and the weights f32. lavapipe scalarises
// every storage-buffer load, so a vec4 of x per edge with its index and weight loaded once
// instead of 4 times is what pays (BENCHMARKS.md). The body is aggregate.glsl.
#extension GL_GOOGLE_include_directive : require
#define SPMM_WIDTH 4
#include "spmm/aggregate.glsl"
