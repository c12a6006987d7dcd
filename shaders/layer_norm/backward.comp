#version 450
// Layer norm backward, input gradient, from the mean and rstd the forward saved:
//   xhat = (x - mean) * rstd,  g = dy * gamma,
//   dx = rstd * (g - mean_row(g) - xhat * mean_row(g * xhat))   (= or += with kAccumulate)
// With kAddend a tensor shaped like x is added to dx as well (binding 9): a residual stream's
// gradient, which the graph would otherwise copy into dx before this kernel added to it.
// v + addend is the sum that copy-then-accumulate makes, so the bits are the same.
// Each row is read twice: the two row sums, then the output.
//
// Layouts as in forward.comp: kRowPerInvocation (one invocation per row, for short rows,
// else one workgroup per row), kOneSubgroup, and kTexelInput (x, dy and gamma read through
// R32F texel buffers, bindings 1, 3, 5, instead of the storage buffers 0, 2, 4; with kVec4,
// RGBA32F texels of 4 adjacent columns, for rows of a workgroup when N % 4 == 0 and the
// views are 16-byte aligned, so skips are multiples of 4). Every
// binding starts at the device's alignment at or below its view, and `*_skip` elements
// into it is the view's first element (ops/binding.h).
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads gamma, mean
// and rstd through one-component texel views at bindings 4, 6 and 7 (FLOATS_OR_TEXELS) and
// has no partials (the host sums the parameters with backward_params.comp instead), so it
// binds x, dy, dx and the addend as storage buffers.
// The storage bindings but the partials hold any float format (common/storage.glsl), each as
// its view says; texels and partials are f32, and so is every sum.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kRowPerInvocation = false;
layout(constant_id = 2) const bool kOneSubgroup = false;
layout(constant_id = 3) const bool kTexelInput = false;
layout(constant_id = 4) const bool kAccumulate = false;
layout(constant_id = 5) const bool kVec4 = false;  // only with kTexelInput, !kRowPerInvocation
layout(constant_id = 6) const bool kAddend = false;
// kWithParams (with kVec4 and one subgroup per workgroup): each workgroup takes a block of
// p.block_rows rows and also sums dy * xhat and dy over them per column, into the block's
// partials (dgamma's at gamma_first + block * N, dbeta's at beta_first + block * N) for
// backward_reduce.comp: x and dy are read once for dx and the parameters together. A lane
// holds kLaneVec4s vec4 columns (N <= 4 * kLaneVec4s * subgroup size).
layout(constant_id = 7) const bool kWithParams = false;
layout(constant_id = 8) const uint kLaneVec4s = 1;

#include "common/kahan.glsl"
#include "common/reduce.glsl"

FLOATS(0, x, readonly)                                            // (rows, N)
layout(set = 0, binding = 1) uniform samplerBuffer x_texels;      // (rows, N)
FLOATS(2, dy, readonly)                                           // (rows, N)
layout(set = 0, binding = 3) uniform samplerBuffer dy_texels;     // (rows, N)
FLOATS_OR_TEXELS(4, gamma)                                        // (N)
layout(set = 0, binding = 5) uniform samplerBuffer gamma_texels;  // (N)
FLOATS_OR_TEXELS(6, mean)                                         // (rows)
FLOATS_OR_TEXELS(7, rstd)                                         // (rows)
FLOATS(8, dx, )  // (rows, N); not writeonly: read when kAccumulate
// (rows, N) with kAddend; otherwise a stand-in never read.
FLOATS(9, addend, readonly)
// kWithParams' partial sums (a stand-in otherwise, never written).
#ifndef FOUR_STORAGE_BUFFERS
layout(set = 0, binding = 10) writeonly buffer Partials { float partials[]; };
#endif
layout(push_constant) uniform Push {
  uint rows;  // numel / N
  uint n;     // length of the last axis, >= 1
  // First element of each view inside its binding (storage and texel alike).
  uint x_skip, dy_skip, gamma_skip, mean_skip, rstd_skip, dx_skip, addend_skip;
  uint block_rows, blocks, gamma_first, beta_first;  // kWithParams
} p;

float loadX(uint i) {
  return kTexelInput ? texelFetch(x_texels, int(p.x_skip + i)).x : LOAD(x, p.x_skip + i);
}
float loadDy(uint i) {
  return kTexelInput ? texelFetch(dy_texels, int(p.dy_skip + i)).x : LOAD(dy, p.dy_skip + i);
}
float loadGamma(uint i) {
  return kTexelInput ? texelFetch(gamma_texels, int(p.gamma_skip + i)).x
                     : LOAD_OR_FETCH(gamma, p.gamma_skip + i);
}
// dx (and the x̂ it reads) are precise: no multiply-add may be fused, which NVIDIA's compiler
// does otherwise and differently per specialization, so that v + addend rounds v first, as
// storing v and adding the addend later does: the bits kAddend promises (lavapipe never fuses).
void store(uint i, float v) {
  precise float sum = v;
  if (kAddend) sum += LOAD(addend, p.addend_skip + i);
  if (kAccumulate) sum += LOAD(dx, p.dx_skip + i);
  STORE(dx, p.dx_skip + i, sum);
}

vec4 fetchX4(uint t) { return texelFetch(x_texels, int(p.x_skip / 4 + t)); }
vec4 fetchDy4(uint t) { return texelFetch(dy_texels, int(p.dy_skip / 4 + t)); }
vec4 fetchGamma4(uint t) { return texelFetch(gamma_texels, int(p.gamma_skip / 4 + t)); }

// One row with 4 columns per fetch: a quarter of the texel fetches, which dominate on lavapipe.
void row4(uint row, uint lane, uint step, float inv_n, float mu, float rs) {
  const uint n4 = p.n / 4, base4 = row * n4;
  Kahan4 sum_g = kKahan4Zero, sum_gx = kKahan4Zero;
  for (uint t = lane; t < n4; t += step) {  // as below: idle lanes add 0
    const vec4 g = fetchDy4(base4 + t) * fetchGamma4(t);
    sum_g = kahan4Add(sum_g, g);
    sum_gx = kahan4Add(sum_gx, g * ((fetchX4(base4 + t) - mu) * rs));
  }
  const vec4 g4 = kahan4Value(sum_g), gx4 = kahan4Value(sum_gx);
  const float a = workgroupSum((g4.x + g4.y) + (g4.z + g4.w)) * inv_n;
  const float b = workgroupSum((gx4.x + gx4.y) + (gx4.z + gx4.w)) * inv_n;
  for (uint t = lane; t < n4; t += step) {
    precise const vec4 xhat = (fetchX4(base4 + t) - mu) * rs;
    precise const vec4 d = rs * ((fetchDy4(base4 + t) * fetchGamma4(t) - a) - xhat * b);
    for (uint k = 0; k < 4; ++k) store(4 * (base4 + t) + k, d[k]);
  }
}

// kWithParams: one block of rows, row by row as row4 (the same sums in the same order, so the
// same dx), with the lane's columns unrolled so their parameter sums stay in registers.
void blockWithParams(uint block, uint lane, uint step, float inv_n) {
  const uint n4 = p.n / 4;
  const uint begin = block * p.block_rows, end = min(p.rows, begin + p.block_rows);
  Kahan4 sum_dyx[kLaneVec4s], sum_dy[kLaneVec4s];
  vec4 gamma4[kLaneVec4s];
  [[unroll]] for (uint i = 0; i < kLaneVec4s; ++i) {
    sum_dyx[i] = kKahan4Zero, sum_dy[i] = kKahan4Zero;
    gamma4[i] = lane + i * step < n4 ? fetchGamma4(lane + i * step) : vec4(0.0);
  }
  for (uint row = begin; row < end; ++row) {
    const float mu = LOAD_OR_FETCH(mean, p.mean_skip + row), rs = LOAD_OR_FETCH(rstd, p.rstd_skip + row);
    const uint base4 = row * n4;
    Kahan4 sum_g = kKahan4Zero, sum_gx = kKahan4Zero;
    [[unroll]] for (uint i = 0; i < kLaneVec4s; ++i) {
      const uint t = lane + i * step;
      if (t >= n4) continue;  // idle lanes add 0
      const vec4 g = fetchDy4(base4 + t) * gamma4[i];
      sum_g = kahan4Add(sum_g, g);
      sum_gx = kahan4Add(sum_gx, g * ((fetchX4(base4 + t) - mu) * rs));
    }
    const vec4 g4 = kahan4Value(sum_g), gx4 = kahan4Value(sum_gx);
    const float a = workgroupSum((g4.x + g4.y) + (g4.z + g4.w)) * inv_n;
    const float b = workgroupSum((gx4.x + gx4.y) + (gx4.z + gx4.w)) * inv_n;
    [[unroll]] for (uint i = 0; i < kLaneVec4s; ++i) {
      const uint t = lane + i * step;
      if (t >= n4) continue;
      const vec4 dy4 = fetchDy4(base4 + t);
      precise const vec4 xhat = (fetchX4(base4 + t) - mu) * rs;
      precise const vec4 d = rs * ((dy4 * gamma4[i] - a) - xhat * b);
      for (uint k = 0; k < 4; ++k) store(4 * (base4 + t) + k, d[k]);
      sum_dyx[i] = kahan4Add(sum_dyx[i], dy4 * xhat);
      sum_dy[i] = kahan4Add(sum_dy[i], dy4);
    }
  }
  [[unroll]] for (uint i = 0; i < kLaneVec4s; ++i) {
    const uint t = lane + i * step;
    if (t >= n4) continue;
    const vec4 gx = kahan4Value(sum_dyx[i]), g = kahan4Value(sum_dy[i]);
#ifndef FOUR_STORAGE_BUFFERS  // the .sb4 build has no partials: the host never sets kWithParams
    for (uint k = 0; k < 4; ++k) {
      partials[p.gamma_first + block * p.n + 4 * t + k] = gx[k];
      partials[p.beta_first + block * p.n + 4 * t + k] = g[k];
    }
#endif
  }
}

void main() {
  const float inv_n = 1.0 / float(p.n);
  if (kRowPerInvocation) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // row < rows: the grid is rounded up to whole workgroups (no barriers on this path).
    for (uint row = gl_GlobalInvocationID.x; row < p.rows; row += stride) {
      const uint base = row * p.n;
      const float mu = LOAD_OR_FETCH(mean, p.mean_skip + row), rs = LOAD_OR_FETCH(rstd, p.rstd_skip + row);
      Kahan sum_g = kKahanZero, sum_gx = kKahanZero;
      for (uint i = 0; i < p.n; ++i) {
        const float g = loadDy(base + i) * loadGamma(i);
        sum_g = kahanAdd(sum_g, g);
        sum_gx = kahanAdd(sum_gx, g * ((loadX(base + i) - mu) * rs));
      }
      const float a = kahanValue(sum_g) * inv_n, b = kahanValue(sum_gx) * inv_n;
      for (uint i = 0; i < p.n; ++i) {
        precise const float xhat = (loadX(base + i) - mu) * rs;
        precise const float d = rs * ((loadDy(base + i) * loadGamma(i) - a) - xhat * b);
        store(base + i, d);
      }
    }
  } else {
    const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    if (kWithParams) {
      for (uint block = gl_WorkGroupID.x; block < p.blocks; block += gl_NumWorkGroups.x)
        blockWithParams(block, lane, step, inv_n);
      return;
    }
    // The row loop is the same for the whole workgroup, so the barriers inside
    // workgroupSum stay in uniform control flow.
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
      const float mu = LOAD_OR_FETCH(mean, p.mean_skip + row), rs = LOAD_OR_FETCH(rstd, p.rstd_skip + row);
      if (kVec4) {
        row4(row, lane, step, inv_n, mu, rs);
        continue;
      }
      const uint base = row * p.n;
      // Compensated per-lane sums: an 8-wide workgroup gives each lane 1e4+ values of a
      // long row (common/kahan.glsl).
      Kahan sum_g = kKahanZero, sum_gx = kKahanZero;
      // i < n in each loop: the row need not be a multiple of the workgroup size; idle
      // lanes contribute 0 to the sums.
      for (uint i = lane; i < p.n; i += step) {
        const float g = loadDy(base + i) * loadGamma(i);
        sum_g = kahanAdd(sum_g, g);
        sum_gx = kahanAdd(sum_gx, g * ((loadX(base + i) - mu) * rs));
      }
      const float a = workgroupSum(kahanValue(sum_g)) * inv_n;
      const float b = workgroupSum(kahanValue(sum_gx)) * inv_n;
      for (uint i = lane; i < p.n; i += step) {
        precise const float xhat = (loadX(base + i) - mu) * rs;
        precise const float d = rs * ((loadDy(base + i) * loadGamma(i) - a) - xhat * b);
        store(base + i, d);
      }
    }
  }
}
