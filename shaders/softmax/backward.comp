#version 450
// Softmax backward from the saved output y: dx (= or +=) y * (dy - sum(dy * y)) along each
// row. Each row of y and dy is read twice (the dot product, then the output).
// Layouts: softmax/rows.glsl. dx may be exactly y or dy: every element is read before the
// invocation that reads it last writes it. Tensors in any float format
// (common/storage.glsl): the dot product and the arithmetic are f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(constant_id = 4) const bool kAccumulate = false;

#include "softmax/rows.glsl"

FLOATS(0, y, readonly)                                           // (rows, N) from y_skip
layout(set = 0, binding = 1) uniform samplerBuffer y_texels;      // the same, if kTexelInput (f32)
FLOATS(2, dy, readonly)                                          // (rows, N) from dy_skip
layout(set = 0, binding = 3) uniform samplerBuffer dy_texels;     // the same, if kTexelInput (f32)
FLOATS(4, dx, )  // (rows, N); not writeonly: kAccumulate reads it
layout(push_constant) uniform Push {
  uint rows;  // numel / N
  uint n;     // >= 1
  uint y_skip, dy_skip, dx_skip;  // first elements inside the bindings (ops/binding.h)
} p;

float loadY(uint i) {
  return kTexelInput ? texelFetch(y_texels, int(p.y_skip + i)).x : LOAD(y, p.y_skip + i);
}
float loadDy(uint i) {
  return kTexelInput ? texelFetch(dy_texels, int(p.dy_skip + i)).x : LOAD(dy, p.dy_skip + i);
}

void processRow(uint row, uint first, uint step) {
  const uint base = row * p.n;
  Kahan dot = kKahanZero;
  for (uint i = first; i < p.n; i += step) dot = kahanAdd(dot, loadDy(base + i) * loadY(base + i));
  const float s = rowSum(kahanValue(dot));
  for (uint i = first; i < p.n; i += step) {
    float d = loadY(base + i) * (loadDy(base + i) - s);
    if (kAccumulate) d += LOAD(dx, p.dx_skip + base + i);
    STORE(dx, p.dx_skip + base + i, d);
  }
}

void main() { forEachRow(p.rows); }
