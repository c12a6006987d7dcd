#version 450
#extension GL_GOOGLE_include_directive : require
// elementwise/binary.glsl through storage buffers, one element per step: any device, any
// offset, every tensor in any float format.
#include "common/storage.glsl"
#define EW_TEXEL 0
#include "elementwise/binary.glsl"
