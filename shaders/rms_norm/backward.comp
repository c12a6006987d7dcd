#version 450
// RMS norm backward, dx: with g = dy * gamma and xhat = x * rstd (rstd as the forward saved
// it),
//   dx = rstd * (g - xhat * mean_row(g * xhat))
// written (= or += with kAccumulate). Layouts as forward.comp: one invocation per row
// (kRowPerInvocation) or one workgroup per row. dgamma is backward_params.comp's. Tensors in
// any float format (common/storage.glsl); the row sums are f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kRowPerInvocation = false;
layout(constant_id = 2) const bool kAccumulate = false;
layout(constant_id = 3) const bool kOneSubgroup = false;  // as in forward.comp

#include "common/reduce.glsl"
#include "common/kahan.glsl"

FLOATS(0, x, readonly)      // (rows, N)
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads gamma and
// rstd through one-component texel views (FLOATS_OR_TEXELS).
FLOATS_OR_TEXELS(1, gamma)  // (N)
FLOATS_OR_TEXELS(2, rstd)   // (rows)
FLOATS(3, dy, readonly)     // (rows, N)
FLOATS(4, dx, )             // (rows, N); not writeonly: kAccumulate reads it
layout(push_constant) uniform Push {
  uint rows, n;
  uint x_skip, gamma_skip, rstd_skip, dy_skip, dx_skip;
} p;

// g * xhat / rstd = dy * gamma * x: the row sum is taken of this and scaled by rstd once.
float gx(uint row, uint i) {
  return LOAD(dy, p.dy_skip + row * p.n + i) * LOAD_OR_FETCH(gamma, p.gamma_skip + i) *
         LOAD(x, p.x_skip + row * p.n + i);
}

void store(uint row, uint i, float r, float c) {
  const uint at = p.dx_skip + row * p.n + i;
  const float g = LOAD(dy, p.dy_skip + row * p.n + i) * LOAD_OR_FETCH(gamma, p.gamma_skip + i);
  float v = r * (g - LOAD(x, p.x_skip + row * p.n + i) * c);
  if (kAccumulate) v += LOAD(dx, at);
  STORE(dx, at, v);
}

void main() {
  const float inv_n = 1.0 / float(p.n);
  if (kRowPerInvocation) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // row < rows: the grid is rounded up to whole workgroups (no barriers on this path).
    for (uint row = gl_GlobalInvocationID.x; row < p.rows; row += stride) {
      const float r = LOAD_OR_FETCH(rstd, p.rstd_skip + row);
      Kahan s = kKahanZero;
      for (uint i = 0; i < p.n; ++i) s = kahanAdd(s, gx(row, i));
      // xhat * mean(g * xhat) = x * (r^2 * mean(g * x)): c is the factor of x.
      const float c = r * r * kahanValue(s) * inv_n;
      for (uint i = 0; i < p.n; ++i) store(row, i, r, c);
    }
  } else {
    const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    // Uniform row loop: workgroupSum's barriers stay in uniform control flow.
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
      const float r = LOAD_OR_FETCH(rstd, p.rstd_skip + row);
      Kahan s = kKahanZero;
      // i < n: the row need not be a multiple of the workgroup; idle lanes add 0.
      for (uint i = lane; i < p.n; i += step) s = kahanAdd(s, gx(row, i));
      const float c = r * r * workgroupSum(kahanValue(s)) * inv_n;
      for (uint i = lane; i < p.n; i += step) store(row, i, r, c);
    }
  }
}
