#version 450
// Softmax backward from the saved output y: dx (= or +=) y * (dy - sum(dy * y)) along each
// row. Each row of y and dy is read twice (the dot product, then the output).
// Layouts: softmax/rows.glsl. dx may be exactly y or dy: every element is read before the
// invocation that reads it last writes it.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(constant_id = 4) const bool kAccumulate = false;

#include "softmax/rows.glsl"

layout(set = 0, binding = 0) readonly buffer Y { float y[]; };    // (rows, N) from y_skip
layout(set = 0, binding = 1) uniform samplerBuffer y_texels;      // the same, if kTexelInput
layout(set = 0, binding = 2) readonly buffer DY { float dy[]; };  // (rows, N) from dy_skip
layout(set = 0, binding = 3) uniform samplerBuffer dy_texels;     // the same, if kTexelInput
layout(set = 0, binding = 4) buffer DX { float dx[]; };  // (rows, N); kAccumulate reads it
layout(push_constant) uniform Push {
  uint rows;  // numel / N
  uint n;     // >= 1
  uint y_skip, dy_skip, dx_skip;  // first elements inside the bindings (ops/binding.h)
} p;

float loadY(uint i) {
  return kTexelInput ? texelFetch(y_texels, int(p.y_skip + i)).x : y[p.y_skip + i];
}
float loadDy(uint i) {
  return kTexelInput ? texelFetch(dy_texels, int(p.dy_skip + i)).x : dy[p.dy_skip + i];
}

void processRow(uint row, uint first, uint step) {
  const uint base = row * p.n;
  Kahan dot = kKahanZero;
  for (uint i = first; i < p.n; i += step) dot = kahanAdd(dot, loadDy(base + i) * loadY(base + i));
  const float s = rowSum(kahanValue(dot));
  for (uint i = first; i < p.n; i += step) {
    float d = loadY(base + i) * (loadDy(base + i) - s);
    if (kAccumulate) d += dx[p.dx_skip + base + i];
    dx[p.dx_skip + base + i] = d;
  }
}

void main() { forEachRow(p.rows); }
