#version 450
// Second pass of the blocked parameter gradients (backward_params.comp): sums the per-block
// partials of each column in block order, compensated, into dgamma and dbeta (= or += with
// kAccumulate). One invocation per column; adjacent invocations read adjacent partials.
// dgamma and dbeta in any float format (common/storage.glsl); the partials and sums are f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;
layout(constant_id = 2) const bool kGamma = true;  // whether that output is wanted
layout(constant_id = 3) const bool kBeta = true;

#include "common/kahan.glsl"

// dgamma partials (blocks, N) at gamma_partials, dbeta partials (blocks, N) at beta_partials.
layout(set = 0, binding = 0) readonly buffer Partials { float partials[]; };
// (N) each; an unwanted one is bound to a placeholder and never written.
FLOATS(1, dgamma, )
FLOATS(2, dbeta, )
layout(push_constant) uniform Push {
  uint n, blocks;
  uint gamma_partials, beta_partials;  // where each set of partials starts in the binding
  uint dgamma_skip, dbeta_skip;        // first elements of the views inside their bindings
} p;

float sumColumn(uint first, uint c) {
  Kahan s = kKahanZero;
  for (uint b = 0; b < p.blocks; ++b) s = kahanAdd(s, partials[first + b * p.n + c]);
  return kahanValue(s);
}

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // c < n: the grid is rounded up to whole workgroups (no barriers in this shader).
  for (uint c = gl_GlobalInvocationID.x; c < p.n; c += stride) {
    if (kGamma) {
      float v = sumColumn(p.gamma_partials, c);
      if (kAccumulate) v += LOAD(dgamma, p.dgamma_skip + c);
      STORE(dgamma, p.dgamma_skip + c, v);
    }
    if (kBeta) {
      float v = sumColumn(p.beta_partials, c);
      if (kAccumulate) v += LOAD(dbeta, p.dbeta_skip + c);
      STORE(dbeta, p.dbeta_skip + c, v);
    }
  }
}
