#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Batch norm backward (ops/batch_norm.h): one workgroup per channel (grid-stride over
// channels) sums dy and dy * xhat over the channel, writes dgamma and dbeta from one
// invocation, then dx, all in one dispatch. Training:
//   dx = gamma rstd (dy - (sum dy + xhat sum dy xhat) / M)
// inference (the running statistics are constants): dx = gamma rstd dy, rstd from the
// running variance bound as `stat1`. The sums are strided per-invocation sums then
// common/reduce.glsl's fixed tree: deterministic, no atomics. x, gamma, dy and the gradients
// in any float format (common/storage.glsl); accumulation adds in f32 and rounds once.
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads gamma and
// the statistics through texel views and binds two outputs: the host dispatches it once for
// dgamma and dbeta and once for dx. The dx dispatch takes the sums again in the same order, or
// with kSavedSums reads them back from dgamma and dbeta (f32, overwritten: the same bits).
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kTraining = true;
layout(constant_id = 2) const bool kDx = true;      // write dx
layout(constant_id = 3) const bool kGamma = true;   // write dgamma
layout(constant_id = 4) const bool kBeta = true;    // write dbeta
layout(constant_id = 5) const bool kAccDx = false;  // += instead of =
layout(constant_id = 6) const bool kAccGamma = false;
layout(constant_id = 7) const bool kAccBeta = false;
// The workgroup is one subgroup (CPU devices): the reductions need no shared memory and no
// barrier (common/reduce.glsl). Otherwise any workgroup size.
layout(constant_id = 8) const bool kOneSubgroup = false;

#include "common/reduce.glsl"

FLOATS(0, x, readonly)      // (N,C,S)
FLOATS_OR_TEXELS(1, gamma)  // (C)
// Training: the saved mean and 1/std; inference: the running mean and variance.
#ifdef FOUR_STORAGE_BUFFERS
TEXELS(2, stat0)  // (C) f32
TEXELS(3, stat1)  // (C) f32
#define STAT0(I) FETCH(stat0, int(I)).x
#define STAT1(I) FETCH(stat1, int(I)).x
#else
layout(set = 0, binding = 2) readonly buffer Stat0 { float stat0[]; };  // (C)
layout(set = 0, binding = 3) readonly buffer Stat1 { float stat1[]; };  // (C)
#define STAT0(I) stat0[I]
#define STAT1(I) stat1[I]
#endif
FLOATS(4, dy, readonly)  // (N,C,S)
#ifdef FOUR_STORAGE_BUFFERS
// kDx alone: the channel sums from the dgamma and dbeta an earlier dispatch stored (f32), at
// dgamma_skip and dbeta_skip (this dispatch writes neither).
layout(constant_id = 9) const bool kSavedSums = false;
TEXELS(7, saved_dgamma)  // (C) f32: sum dy xhat
TEXELS(8, saved_dbeta)   // (C) f32: sum dy
#endif
// Outputs; one not wanted is bound to a stand-in and never touched. Read to accumulate.
#ifdef FOUR_STORAGE_BUFFERS
// Binding 5 is dx (kDx) or dbeta (kBeta, never with kDx), binding 6 dgamma.
FLOATS(5, dx, )      // (N,C,S) or (C)
FLOATS(6, dgamma, )  // (C)
#define dbeta dx
#define dbeta_dtype dx_dtype
#define dbeta_16 dx_16
#else
FLOATS(5, dx, )      // (N,C,S)
FLOATS(6, dgamma, )  // (C)
FLOATS(7, dbeta, )   // (C)
#endif

layout(push_constant) uniform Push {
  uint n, c, s;  // x as (N,C,S)
  float eps;     // inference: added to the running variance
  // First element of each view inside its binding (ops/binding.h).
  uint x_skip, gamma_skip, stat0_skip, stat1_skip, dy_skip, dx_skip, dgamma_skip, dbeta_skip;
} p;

#include "batch_norm/channel.glsl"

void main() {
  const uint m = p.n * p.s, t = gl_LocalInvocationID.x, w = gl_WorkGroupSize.x;
#ifdef FOUR_STORAGE_BUFFERS
  // dx in inference needs none; with kSavedSums it reads them.
  const bool sums = kGamma || kBeta || (kDx && kTraining && !kSavedSums);
#else
  const bool sums = kGamma || kBeta || (kDx && kTraining);  // dx in inference needs none
#endif
  // The channel loop depends on the workgroup alone, so every invocation of a workgroup
  // reaches the reductions' barriers together.
  for (uint c = gl_WorkGroupID.x; c < p.c; c += gl_NumWorkGroups.x) {
    const float mean = STAT0(p.stat0_skip + c);
    const float rstd =
        kTraining ? STAT1(p.stat1_skip + c) : inversesqrt(STAT1(p.stat1_skip + c) + p.eps);
    float sum_dy = 0.0, sum_dyx = 0.0;
    if (sums) {
      // Strided loops: the condition is the bounds guard of the last stride.
      for (uint i = t; i < m; i += w) {
        const uint e = channelElement(c, i);
        const float g = LOAD(dy, p.dy_skip + e);
        sum_dy += g;
        sum_dyx += g * ((LOAD(x, p.x_skip + e) - mean) * rstd);
      }
      sum_dy = workgroupSum(sum_dy);
      sum_dyx = workgroupSum(sum_dyx);
    }
#ifdef FOUR_STORAGE_BUFFERS
    if (kSavedSums) {
      sum_dy = FETCH(saved_dbeta, int(p.dbeta_skip + c)).x;
      sum_dyx = FETCH(saved_dgamma, int(p.dgamma_skip + c)).x;
    }
#endif
    if (t == 0) {  // one writer per channel
      if (kGamma) {
        const uint at = p.dgamma_skip + c;
        STORE(dgamma, at, kAccGamma ? LOAD(dgamma, at) + sum_dyx : sum_dyx);
      }
      if (kBeta) {
        const uint at = p.dbeta_skip + c;
        STORE(dbeta, at, kAccBeta ? LOAD(dbeta, at) + sum_dy : sum_dy);
      }
    }
    if (kDx) {
      const float scale = LOAD_OR_FETCH(gamma, p.gamma_skip + c) * rstd;
      const float a = sum_dy / float(m), b = sum_dyx / float(m);
      for (uint i = t; i < m; i += w) {
        const uint e = channelElement(c, i);
        const float g = LOAD(dy, p.dy_skip + e);
        const float v =
            kTraining ? scale * (g - a - (LOAD(x, p.x_skip + e) - mean) * rstd * b) : scale * g;
        const uint at = p.dx_skip + e;
        STORE(dx, at, kAccDx ? LOAD(dx, at) + v : v);
      }
    }
  }
}
