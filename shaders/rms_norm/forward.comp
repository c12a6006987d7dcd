#version 450
// RMS norm over the last axis (Llama's LlamaRMSNorm): y = x * rstd * gamma with
// rstd = 1 / sqrt(mean(x^2) + eps); rstd is saved per row for the backward pass. Unlike
// layer_norm/forward.comp there is no mean to subtract and no beta, so one pass of squares.
//
// kRowPerInvocation: one invocation per row (short rows); otherwise one workgroup per row
// (of one subgroup on CPU devices: kOneSubgroup), its lanes' compensated partial sums combined
// by common/reduce.glsl. Every binding starts
// at the device's alignment at or below its view, and `*_skip` elements into it is the
// view's first element (ops/binding.h). Tensors in any float format (common/storage.glsl);
// the sum of squares and rstd are f32 whatever they are stored in.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kRowPerInvocation = false;
// A workgroup of one subgroup (CPU devices, which promise it): reduce.glsl's shared-memory
// stage and its barriers compile away (see common/reduce.glsl).
layout(constant_id = 2) const bool kOneSubgroup = false;

#include "common/reduce.glsl"
#include "common/kahan.glsl"

FLOATS(0, x, readonly)          // (rows, N)
FLOATS(1, gamma, readonly)      // (N)
FLOATS(2, y, writeonly)         // (rows, N)
FLOATS(3, rstd_out, writeonly)  // (rows)
layout(push_constant) uniform Push {
  uint rows;  // numel / N
  uint n;     // length of the last axis, >= 1
  float eps;  // added to the mean square, >= 0
  uint x_skip, gamma_skip, y_skip, rstd_skip;
} p;

// 1/sqrt rather than inversesqrt: the latter may be a low-precision estimate.
float rstdOf(float mean_square) { return 1.0 / sqrt(mean_square + p.eps); }

void main() {
  const float inv_n = 1.0 / float(p.n);
  if (kRowPerInvocation) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // row < rows: the grid is rounded up to whole workgroups (no barriers on this path).
    for (uint row = gl_GlobalInvocationID.x; row < p.rows; row += stride) {
      const uint base = p.x_skip + row * p.n;
      Kahan sq = kKahanZero;
      for (uint i = 0; i < p.n; ++i) {
        const float v = LOAD(x, base + i);
        sq = kahanAdd(sq, v * v);
      }
      const float rstd = rstdOf(kahanValue(sq) * inv_n);
      for (uint i = 0; i < p.n; ++i)
        STORE(y, p.y_skip + row * p.n + i,
              LOAD(x, base + i) * rstd * LOAD(gamma, p.gamma_skip + i));
      STORE(rstd_out, p.rstd_skip + row, rstd);
    }
  } else {
    const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    // The row loop is the same for the whole workgroup, so the barriers inside
    // workgroupSum stay in uniform control flow.
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
      const uint base = p.x_skip + row * p.n;
      Kahan sq = kKahanZero;
      // i < n: the row need not be a multiple of the workgroup; idle lanes add 0.
      for (uint i = lane; i < p.n; i += step) {
        const float v = LOAD(x, base + i);
        sq = kahanAdd(sq, v * v);
      }
      const float rstd = rstdOf(workgroupSum(kahanValue(sq)) * inv_n);
      for (uint i = lane; i < p.n; i += step)
        STORE(y, p.y_skip + row * p.n + i,
              LOAD(x, base + i) * rstd * LOAD(gamma, p.gamma_skip + i));
      // One writer per row; every lane holds the same rstd.
      if (lane == 0) STORE(rstd_out, p.rstd_skip + row, rstd);
    }
  }
}
