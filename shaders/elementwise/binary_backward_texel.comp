#version 450
#extension GL_GOOGLE_include_directive : require
// elementwise/binary_backward.glsl with its inputs fetched four floats at a time from RGBA32F texel
// buffers; the host picks it when the views fit the device's texel-buffer limits.
#define EW_TEXEL 1
#define EW_ONE_GRADIENT 0
#include "elementwise/binary_backward.glsl"
