#version 450
// Row-wise softmax over the last axis: y = exp(x - max) / sum(exp(x - max)), with the
// (max, sum) pair gathered online so each row is read twice (statistics, then output),
// not three times. A row that is all -inf gives zeros. Layouts: softmax/rows.glsl. x and y in
// any float format (common/storage.glsl): the arithmetic is f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

#include "softmax/rows.glsl"

FLOATS(0, x, readonly)                                          // (rows, N) from x_skip
layout(set = 0, binding = 1) uniform samplerBuffer x_texels;     // the same, if kTexelInput (f32)
FLOATS(2, y, writeonly)                                         // (rows, N) from y_skip
layout(push_constant) uniform Push {
  uint rows;    // numel / N
  uint n;       // length of the last axis, >= 1
  uint x_skip;  // first element of x inside its bindings (see ops/binding.h)
  uint y_skip;
} p;

float loadX(uint i) {
  return kTexelInput ? texelFetch(x_texels, int(p.x_skip + i)).x : LOAD(x, p.x_skip + i);
}

void processRow(uint row, uint first, uint step) {
  const uint base = row * p.n;
  MaxSumAcc acc = kMaxSumAccEmpty;
  // i < n: the row need not be a multiple of the step; idle lanes keep the empty pair,
  // which the combine ignores.
  for (uint i = first; i < p.n; i += step) acc = maxSumAccAdd(acc, loadX(base + i));
  const MaxSum stats = rowMaxSum(maxSumAccResult(acc));
  if (stats.m == kNegInf) {
    // All -inf (s = 0): zeros, where exp(x - m) / s would be NaN.
    for (uint i = first; i < p.n; i += step) STORE(y, p.y_skip + base + i, 0.0);
    return;
  }
  const float inv_sum = 1.0 / stats.s;
  for (uint i = first; i < p.n; i += step)
    STORE(y, p.y_skip + base + i, exp(loadX(base + i) - stats.m) * inv_sum);
}

void main() { forEachRow(p.rows); }
