#version 450
// rows_out[r] = sum over the row's D elements of term(KIND, a[r, j], b[r, j]) (terms.glsl).
// One workgroup per row at a time: each lane sums a fixed strided slice (Kahan), then a
// fixed-order workgroup combine (common/reduce.glsl): the same bits every run, no atomics.
// The mean over rows is a second dispatch (ops/reduce.h's meanRows). a, b and rows_out in
// any float format; the terms and the sums are f32, and only the store of a row's sum rounds.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;
const bool kOneSubgroup = false;  // any workgroup size on any device

#include "common/kahan.glsl"
#include "common/reduce.glsl"
#include "vae_loss/terms.glsl"

FLOATS(0, a, readonly)          // (rows, D)
FLOATS(1, b, readonly)          // (rows, D)
FLOATS(2, rows_out, writeonly)  // (rows)
layout(push_constant) uniform Push {
  uint rows, cols;
  uint a_skip, b_skip, rows_skip;  // first elements inside the bindings (ops/binding.h)
} p;

void main() {
  for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
    Kahan sum = kKahanZero;
    for (uint j = gl_LocalInvocationID.x; j < p.cols; j += gl_WorkGroupSize.x) {
      const uint i = r * p.cols + j;
      sum = kahanAdd(sum, term(KIND, LOAD(a, p.a_skip + i), LOAD(b, p.b_skip + i)));
    }
    const float total = workgroupSum(kahanValue(sum));
    if (gl_LocalInvocationID.x == 0) STORE(rows_out, p.rows_skip + r, total);
  }
}
