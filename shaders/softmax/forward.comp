#version 450
// Row-wise softmax over the last axis: y = exp(x - max) / sum(exp(x - max)), with the
// (max, sum) pair gathered online so each row is read twice (statistics, then output),
// not three times. A row that is all -inf gives zeros.
//
// Specialization constants pick the layout per device and shape:
//  kRowPerInvocation false: one workgroup per row, grid-striding over rows when there
//         are more rows than workgroups. Each invocation keeps the pair of its strided
//         slice of the row; the workgroup combines them (common/reduce.glsl).
//  kRowPerInvocation true: one invocation per row, for short rows: a workgroup per
//         7-element row would leave most lanes idle and pay a reduction per handful of
//         elements.
//  kOneSubgroup: the workgroup is one subgroup (see common/reduce.glsl).
//  kTexelInput: x is read through an R32F texel buffer (binding 1) instead of the
//         storage buffer (binding 0); on lavapipe texel fetches are branch-free gathers
//         while storage loads are scalarised per lane with bounds checks (~3x slower).
//         The host binds both either way, the unused one to a valid dummy range.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kRowPerInvocation = false;
layout(constant_id = 2) const bool kOneSubgroup = false;
layout(constant_id = 3) const bool kTexelInput = false;

#include "common/reduce.glsl"

layout(set = 0, binding = 0) readonly buffer X { float x[]; };      // (rows, N)
layout(set = 0, binding = 1) uniform samplerBuffer x_texels;        // (rows, N) from x_first
layout(set = 0, binding = 2) writeonly buffer Y { float y[]; };     // (rows, N)
layout(push_constant) uniform Push {
  uint rows;     // numel / N
  uint n;        // length of the last axis, >= 1
  uint x_first;  // texel of x_texels holding x[0] (its view starts at an aligned offset)
} p;

float loadX(uint i) { return kTexelInput ? texelFetch(x_texels, int(p.x_first + i)).x : x[i]; }

// Writes elements first, first + step, ... of the row at base.
void writeRow(uint base, uint first, uint step, MaxSum stats) {
  if (stats.m == kNegInf) {
    // All -inf (s = 0): zeros, where exp(x - m) / s would be NaN.
    for (uint i = first; i < p.n; i += step) y[base + i] = 0.0;
    return;
  }
  const float inv_sum = 1.0 / stats.s;
  for (uint i = first; i < p.n; i += step) y[base + i] = exp(loadX(base + i) - stats.m) * inv_sum;
}

void main() {
  if (kRowPerInvocation) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // row < rows: the grid is rounded up to whole workgroups (no barriers on this path).
    for (uint row = gl_GlobalInvocationID.x; row < p.rows; row += stride) {
      const uint base = row * p.n;
      MaxSumAcc acc = kMaxSumAccEmpty;
      for (uint i = 0; i < p.n; ++i) acc = maxSumAccAdd(acc, loadX(base + i));
      writeRow(base, 0, 1, maxSumAccResult(acc));
    }
  } else {
    // The row loop is the same for the whole workgroup, so the barriers inside
    // workgroupMaxSum stay in uniform control flow.
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
      const uint base = row * p.n;
      MaxSumAcc acc = kMaxSumAccEmpty;
      // i < n: the row need not be a multiple of the workgroup size; idle lanes keep
      // the empty pair, which the combine ignores.
      for (uint i = gl_LocalInvocationID.x; i < p.n; i += gl_WorkGroupSize.x)
        acc = maxSumAccAdd(acc, loadX(base + i));
      const MaxSum stats = workgroupMaxSum(maxSumAccResult(acc));
      writeRow(base, gl_LocalInvocationID.x, gl_WorkGroupSize.x, stats);
    }
  }
}
