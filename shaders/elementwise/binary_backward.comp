#version 450
#extension GL_GOOGLE_include_directive : require
// elementwise/binary_backward.glsl through storage buffers, one float per step: any device, any offset.
#define EW_TEXEL 0
#include "elementwise/binary_backward.glsl"
