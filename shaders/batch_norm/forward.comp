#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Batch norm forward (ops/batch_norm.h): one workgroup per channel (grid-stride over
// channels), the whole channel in one dispatch.
//   kTraining: the channel's mean and biased variance in two passes over x - shift (shift =
//   the channel's first element, exact for offset data by Sterbenz, as layer_norm/forward.comp
//   does: no E[x^2] - E[x]^2 cancellation), saved as mean and rstd; with kUpdateRunning the
//   running statistics are updated in place (the unbiased variance); then y.
//   Inference: bindings 4 and 5 hold the running mean and variance, read only; then y.
// The sums are per-invocation strided sums then common/reduce.glsl's fixed tree: the same
// bits every run. x, gamma, beta and y in any float format (common/storage.glsl); the
// statistics f32.
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads gamma and
// beta through texel views and has no running bindings: with kUpdateRunning it saves the
// biased variance in place of rstd, and batch_norm/running.comp, the next dispatch, updates
// the running statistics from it and writes rstd (the same f32 operations, the same bits).
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kTraining = true;
layout(constant_id = 2) const bool kUpdateRunning = false;  // only with kTraining
// The workgroup is one subgroup (CPU devices): the reductions need no shared memory and no
// barrier (common/reduce.glsl). Otherwise any workgroup size.
layout(constant_id = 3) const bool kOneSubgroup = false;

#include "common/reduce.glsl"

FLOATS(0, x, readonly)   // (N,C,S)
FLOATS_OR_TEXELS(1, gamma)  // (C)
FLOATS_OR_TEXELS(2, beta)   // (C)
FLOATS(3, y, writeonly)     // (N,C,S)
// Training: mean and 1/std written (.sb4 with kUpdateRunning: mean and the biased variance).
// Inference: running mean and variance, read.
layout(set = 0, binding = 4) buffer Stat0 { float stat0[]; };  // (C)
layout(set = 0, binding = 5) buffer Stat1 { float stat1[]; };  // (C)
#ifndef FOUR_STORAGE_BUFFERS
// kUpdateRunning: updated in place; otherwise stand-ins, never touched.
layout(set = 0, binding = 6) buffer RunningMean { float running_mean[]; };  // (C)
layout(set = 0, binding = 7) buffer RunningVar { float running_var[]; };    // (C)
#endif

layout(push_constant) uniform Push {
  uint n, c, s;    // x as (N,C,S)
  float eps;       // added to the variance
  float momentum;  // the running statistics' update weight
  // First element of each view inside its binding (ops/binding.h).
  uint x_skip, gamma_skip, beta_skip, y_skip, stat0_skip, stat1_skip, rmean_skip, rvar_skip;
} p;

#include "batch_norm/channel.glsl"

void main() {
  const uint m = p.n * p.s, t = gl_LocalInvocationID.x, w = gl_WorkGroupSize.x;
  // The channel loop depends on the workgroup alone, so every invocation of a workgroup
  // reaches the reductions' barriers together.
  for (uint c = gl_WorkGroupID.x; c < p.c; c += gl_NumWorkGroups.x) {
    float shift, delta, rstd;  // y = (x - shift - delta) * rstd * gamma + beta
    if (kTraining) {
      shift = LOAD(x, p.x_skip + channelElement(c, 0));
      float sum = 0.0;
      // Strided loops: the condition is the bounds guard of the last stride.
      for (uint i = t; i < m; i += w) sum += LOAD(x, p.x_skip + channelElement(c, i)) - shift;
      delta = workgroupSum(sum) / float(m);
      float squares = 0.0;
      for (uint i = t; i < m; i += w) {
        const float d = LOAD(x, p.x_skip + channelElement(c, i)) - shift - delta;
        squares += d * d;
      }
      const float var = workgroupSum(squares) / float(m);
      rstd = inversesqrt(var + p.eps);
      if (t == 0) {  // one writer per channel
        const float mean = shift + delta;
        stat0[p.stat0_skip + c] = mean;
#ifdef FOUR_STORAGE_BUFFERS
        // batch_norm/running.comp turns the variance into rstd after the update.
        stat1[p.stat1_skip + c] = kUpdateRunning ? var : rstd;
#else
        stat1[p.stat1_skip + c] = rstd;
        if (kUpdateRunning) {
          const float unbiased = var * (float(m) / float(m - 1));  // m >= 2 (host check)
          const uint rm = p.rmean_skip + c, rv = p.rvar_skip + c;
          running_mean[rm] = (1.0 - p.momentum) * running_mean[rm] + p.momentum * mean;
          running_var[rv] = (1.0 - p.momentum) * running_var[rv] + p.momentum * unbiased;
        }
#endif
      }
    } else {
      shift = stat0[p.stat0_skip + c];
      delta = 0.0;
      rstd = inversesqrt(stat1[p.stat1_skip + c] + p.eps);
    }
    const float scale = rstd * LOAD_OR_FETCH(gamma, p.gamma_skip + c);
    const float bias = LOAD_OR_FETCH(beta, p.beta_skip + c);
    for (uint i = t; i < m; i += w) {
      const uint e = channelElement(c, i);
      STORE(y, p.y_skip + e, (LOAD(x, p.x_skip + e) - shift - delta) * scale + bias);
    }
  }
}
