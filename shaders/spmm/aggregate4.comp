#version 450
// spmm's gather, 4 features per invocation: for F and F / H multiples of 4 with x and y
// starting on 16 bytes of their bindings, and x, y and the weights f32. lavapipe scalarises
// every storage-buffer load, so a vec4 of x per edge with its index and weight loaded once
// instead of 4 times is what pays (BENCHMARKS.md). The body is aggregate.glsl.
#extension GL_GOOGLE_include_directive : require
#include "common/storage_or_texels.glsl"
// The index arrays: storage buffers, or texel views in the ".sb4" build (a device that binds
// at most 4 storage buffers per stage).
UINTS_OR_TEXELS(0, offsets)   // (rows + 1)
UINTS_OR_TEXELS(1, nodes)     // (E)
UINTS_OR_TEXELS(2, edge_ids)  // (E)
#define SPMM_WIDTH 4
#include "spmm/aggregate.glsl"
