#version 450
// Batch norm's running update for forward.comp's ".sb4" build (a device that binds at most 4
// storage buffers per stage, where the forward has no room for the running statistics): the
// forward saved each channel's mean and biased variance; this updates running_mean and
// running_var as the usual build does in its forward, in the same f32 operations, then
// replaces the variance with rstd = 1 / sqrt(var + eps), the value the forward used for y.
// One invocation per channel (grid-stride).

layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Mean { float mean[]; };  // (C)
layout(set = 0, binding = 1) buffer Stat1 { float stat1[]; };         // (C): var in, rstd out
layout(set = 0, binding = 2) buffer RunningMean { float running_mean[]; };  // (C)
layout(set = 0, binding = 3) buffer RunningVar { float running_var[]; };    // (C)

layout(push_constant) uniform Push {
  uint c;          // channels
  uint m;          // values per channel, N * S >= 2 (host check)
  float eps;       // added to the variance
  float momentum;  // the running statistics' update weight
  // First element of each view inside its binding (ops/binding.h).
  uint mean_skip, stat1_skip, rmean_skip, rvar_skip;
} p;

void main() {
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  for (uint c = gl_GlobalInvocationID.x; c < p.c; c += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const float mu = mean[p.mean_skip + c], var = stat1[p.stat1_skip + c];
    const float unbiased = var * (float(p.m) / float(p.m - 1));
    const uint rm = p.rmean_skip + c, rv = p.rvar_skip + c;
    running_mean[rm] = (1.0 - p.momentum) * running_mean[rm] + p.momentum * mu;
    running_var[rv] = (1.0 - p.momentum) * running_var[rv] + p.momentum * unbiased;
    stat1[p.stat1_skip + c] = inversesqrt(var + p.eps);
  }
}
