#version 450
#extension GL_GOOGLE_include_directive : require
// dx (= or +=) f'(x) * dy for the activation picked by the KIND specialization constant,
// through storage buffers, one element per step: any device, any offset, every tensor in any
// float format.
#include "common/storage.glsl"
#define EW_TEXEL 0
#include "activation/backward.glsl"
