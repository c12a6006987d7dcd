#version 450
// mean = sum(losses) / count over the rows whose target is < C and not ignore_index; 0 when
// count is 0. count is also stored (as a float, exact below 2^24) after the (max, log-sum)
// pairs in saved, for backward. One workgroup: each lane sums a fixed strided slice (Kahan), then a
// fixed-order workgroup combine (common/reduce.glsl): the same bits every run, no atomics.
// losses, mean and saved in any float format (common/storage.glsl); the sums are f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
const bool kOneSubgroup = false;  // any workgroup size on any device

#include "common/reduce.glsl"

FLOATS(0, losses, readonly)                                                // (rows)
layout(set = 0, binding = 1) readonly buffer Targets { uint targets[]; };  // (rows) u32
FLOATS(2, mean, writeonly)                                                 // (1)
FLOATS(3, saved, writeonly)                                                // (2 rows + 1)
layout(push_constant) uniform Push {
  uint rows;
  uint classes;
  uint ignore_index;
  // First elements inside the bindings (ops/binding.h).
  uint losses_skip, targets_skip, mean_skip, saved_skip;
} p;

void main() {
  Kahan sum = kKahanZero;
  // A masked target's loss is +inf, which would turn the Kahan correction into inf - inf =
  // NaN; infinities go to a plain sum, so the mean is +inf as it should be.
  float infinite = 0.0;
  float count = 0.0;  // integers below 2^24 (checked on the host): exact in any order
  for (uint r = gl_LocalInvocationID.x; r < p.rows; r += gl_WorkGroupSize.x) {
    const float loss = LOAD(losses, p.losses_skip + r);  // ignored rows hold 0
    if (isinf(loss)) infinite += loss;
    else sum = kahanAdd(sum, loss);
    const uint t = targets[p.targets_skip + r];
    count += (t < p.classes && t != p.ignore_index) ? 1.0 : 0.0;
  }
  const float total = workgroupSum(kahanValue(sum) + infinite);
  const float counted = workgroupSum(count);
  if (gl_LocalInvocationID.x == 0) {
    STORE(mean, p.mean_skip, counted == 0.0 ? 0.0 : total / counted);
    STORE(saved, p.saved_skip + 2 * p.rows, counted);
  }
}
