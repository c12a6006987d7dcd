#version 450
#extension GL_GOOGLE_include_directive : require
// y = f(x) for the activation picked by the KIND specialization constant, through storage
// buffers, one float per step: any device, any offset.
#define EW_TEXEL 0
#include "activation/forward.glsl"
