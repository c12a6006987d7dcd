#version 450
// y = x - lse, lse = max + log(sum(exp(x - max))), along each row, with the (max, sum) pair
// gathered online (common/online_softmax.glsl): each row is read twice. -inf entries give
// -inf (log of softmax's 0); a row that is all -inf gives all -inf, where x - lse would be
// -inf - (-inf) = NaN. Layouts: softmax/rows.glsl. x and y in any float format
// (common/storage.glsl): the arithmetic is f32.
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
  uint rows;  // numel / N
  uint n;     // >= 1
  uint x_skip, y_skip;  // first elements inside the bindings (ops/binding.h)
} p;

float loadX(uint i) {
  return kTexelInput ? texelFetch(x_texels, int(p.x_skip + i)).x : LOAD(x, p.x_skip + i);
}

void processRow(uint row, uint first, uint step) {
  const uint base = row * p.n;
  MaxSumAcc acc = kMaxSumAccEmpty;
  // i < n: idle lanes keep the empty pair, which the combine ignores.
  for (uint i = first; i < p.n; i += step) acc = maxSumAccAdd(acc, loadX(base + i));
  const MaxSum stats = rowMaxSum(maxSumAccResult(acc));
  const bool masked = stats.m == kNegInf;
  // (x - m) - log(s), not x - (m + log(s)): for x near m the first difference is exact, so
  // the result keeps its own precision instead of that of m (ulp(1e4) = 1e-3).
  const float log_s = log(stats.s);
  for (uint i = first; i < p.n; i += step) {
    precise const float centred = loadX(base + i) - stats.m;  // precise: no reassociation
    STORE(y, p.y_skip + base + i, masked ? kNegInf : centred - log_s);
  }
}

void main() { forEachRow(p.rows); }
