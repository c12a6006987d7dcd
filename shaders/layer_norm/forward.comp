#version 450
// Layer norm over the last axis: y = (x - mean) * rstd * gamma + beta with
// rstd = 1 / sqrt(var + eps) and var the biased (1/N) variance; mean and rstd are saved
// per row for the backward pass.
//
// Variance in two passes (sum of x, then sum of (x - mean)^2), never E[x^2] - E[x]^2,
// which loses every digit in fp32 when |mean| >> std. Both passes and the output work on
// x - shift, shift = x[row, 0], which is exact for offset data (Sterbenz), and keep the
// mean as shift + delta: fp32 cannot hold a mean of 1000 closer than 3e-5, which would
// be a 3e-3 error in y for a row of std 0.01. The row is read three times; on long rows
// the second and third reads come from cache.
//
// Specialization constants as in softmax/forward.comp: kRowPerInvocation (one invocation
// per row, for short rows, else one workgroup per row), kOneSubgroup, and kTexelInput
// (x, gamma and beta read through R32F texel buffers, bindings 1, 3, 5, instead of the
// storage buffers 0, 2, 4). kVec4 (with kTexelInput, a workgroup per row, N % 4 == 0 and
// the views 16-byte aligned): RGBA32F texels of 4 adjacent columns instead, a quarter of
// the fetches, and with kStore4 (y's skip a multiple of 4 too) y stored 16 bytes at a time.
// Every binding starts at the device's alignment at or below its view, and `*_skip`
// elements into it is the view's first element (ops/binding.h).
//
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads gamma and
// beta through one-component texel views at bindings 2 and 4 (FLOATS_OR_TEXELS), so it binds
// x, y, mean and rstd as storage buffers.
//
// The storage bindings hold any float format (common/storage.glsl), each as its view says;
// the texels (kTexelInput, kVec4, kStore4) are f32 only, and the statistics are f32 whatever
// mean and rstd are stored in.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
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
layout(constant_id = 4) const bool kVec4 = false;
layout(constant_id = 5) const bool kStore4 = false;  // only with kVec4

#include "common/reduce.glsl"
#include "common/kahan.glsl"

FLOATS(0, x, readonly)                                            // (rows, N)
layout(set = 0, binding = 1) uniform samplerBuffer x_texels;      // (rows, N)
FLOATS_OR_TEXELS(2, gamma)                                        // (N)
layout(set = 0, binding = 3) uniform samplerBuffer gamma_texels;  // (N)
FLOATS_OR_TEXELS(4, beta)                                         // (N)
layout(set = 0, binding = 5) uniform samplerBuffer beta_texels;   // (N)
FLOATS(6, y, writeonly)                                           // (rows, N)
layout(set = 0, binding = 6) writeonly buffer Y4 { vec4 y4[]; };  // the same, kStore4 (f32)
FLOATS(7, mean_out, writeonly)                                    // (rows)
FLOATS(8, rstd_out, writeonly)                                    // (rows)
layout(push_constant) uniform Push {
  uint rows;  // numel / N
  uint n;     // length of the last axis, >= 1
  float eps;  // added to the variance, >= 0
  // First element of each view inside its binding (storage and texel alike).
  uint x_skip, gamma_skip, beta_skip, y_skip, mean_skip, rstd_skip;
} p;

float loadX(uint i) {
  return kTexelInput ? texelFetch(x_texels, int(p.x_skip + i)).x : LOAD(x, p.x_skip + i);
}
float loadGamma(uint i) {
  return kTexelInput ? texelFetch(gamma_texels, int(p.gamma_skip + i)).x
                     : LOAD_OR_FETCH(gamma, p.gamma_skip + i);
}
float loadBeta(uint i) {
  return kTexelInput ? texelFetch(beta_texels, int(p.beta_skip + i)).x
                     : LOAD_OR_FETCH(beta, p.beta_skip + i);
}
void store(uint row, uint i, float v) { STORE(y, p.y_skip + row * p.n + i, v); }
void storeStats(uint row, float mean, float rstd) {
  STORE(mean_out, p.mean_skip + row, mean);
  STORE(rstd_out, p.rstd_skip + row, rstd);
}

// 1/sqrt rather than inversesqrt: the latter may be a low-precision estimate.
float rstdOf(float var) { return 1.0 / sqrt(var + p.eps); }

vec4 fetchX4(uint t) { return texelFetch(x_texels, int(p.x_skip / 4 + t)); }
vec4 fetchGamma4(uint t) { return texelFetch(gamma_texels, int(p.gamma_skip / 4 + t)); }
vec4 fetchBeta4(uint t) { return texelFetch(beta_texels, int(p.beta_skip / 4 + t)); }

// One row with 4 columns per fetch (kVec4): the same two-pass, shifted sums as below, each
// lane's four columns compensated apart and added up before the workgroup sum.
void row4(uint row, uint lane, uint step, float inv_n) {
  const uint n4 = p.n / 4, base4 = row * n4;
  const float shift = fetchX4(base4).x;
  Kahan4 sum = kKahan4Zero;
  for (uint t = lane; t < n4; t += step) sum = kahan4Add(sum, fetchX4(base4 + t) - shift);
  const vec4 s4 = kahan4Value(sum);
  const float delta = workgroupSum((s4.x + s4.y) + (s4.z + s4.w)) * inv_n;  // mean - shift
  Kahan4 sq = kKahan4Zero;
  for (uint t = lane; t < n4; t += step) {
    const vec4 d = (fetchX4(base4 + t) - shift) - delta;
    sq = kahan4Add(sq, d * d);
  }
  const vec4 q4 = kahan4Value(sq);
  const float rstd = rstdOf(workgroupSum((q4.x + q4.y) + (q4.z + q4.w)) * inv_n);
  for (uint t = lane; t < n4; t += step) {
    const vec4 v =
        ((fetchX4(base4 + t) - shift) - delta) * rstd * fetchGamma4(t) + fetchBeta4(t);
    if (kStore4) {
      y4[p.y_skip / 4 + base4 + t] = v;
    } else {
      for (uint k = 0; k < 4; ++k) store(row, 4 * t + k, v[k]);
    }
  }
  if (lane == 0) storeStats(row, shift + delta, rstd);
}

void main() {
  const float inv_n = 1.0 / float(p.n);
  if (kRowPerInvocation) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // row < rows: the grid is rounded up to whole workgroups (no barriers on this path).
    for (uint row = gl_GlobalInvocationID.x; row < p.rows; row += stride) {
      const uint base = row * p.n;
      const float shift = loadX(base);
      Kahan sum = kKahanZero;
      for (uint i = 0; i < p.n; ++i) sum = kahanAdd(sum, loadX(base + i) - shift);
      const float delta = kahanValue(sum) * inv_n;  // mean - shift
      Kahan sq = kKahanZero;
      for (uint i = 0; i < p.n; ++i) {
        const float d = (loadX(base + i) - shift) - delta;
        sq = kahanAdd(sq, d * d);
      }
      const float rstd = rstdOf(kahanValue(sq) * inv_n);
      for (uint i = 0; i < p.n; ++i)
        store(row, i, ((loadX(base + i) - shift) - delta) * rstd * loadGamma(i) + loadBeta(i));
      storeStats(row, shift + delta, rstd);
    }
  } else {
    const uint lane = gl_LocalInvocationID.x, step = gl_WorkGroupSize.x;
    // The row loop is the same for the whole workgroup, so the barriers inside
    // workgroupSum stay in uniform control flow.
    for (uint row = gl_WorkGroupID.x; row < p.rows; row += gl_NumWorkGroups.x) {
      if (kVec4) {
        row4(row, lane, step, inv_n);
        continue;
      }
      const uint base = row * p.n;
      const float shift = loadX(base);
      // Per-lane sums are Kahan-compensated: an 8-wide workgroup gives each lane 1e4+
      // values of a long row (common/kahan.glsl).
      Kahan sum = kKahanZero;
      // i < n in each loop: the row need not be a multiple of the workgroup size; idle
      // lanes contribute 0 to the sums.
      for (uint i = lane; i < p.n; i += step) sum = kahanAdd(sum, loadX(base + i) - shift);
      const float delta = workgroupSum(kahanValue(sum)) * inv_n;  // mean - shift
      Kahan sq = kKahanZero;
      for (uint i = lane; i < p.n; i += step) {
        const float d = (loadX(base + i) - shift) - delta;
        sq = kahanAdd(sq, d * d);
      }
      const float rstd = rstdOf(workgroupSum(kahanValue(sq)) * inv_n);
      for (uint i = lane; i < p.n; i += step)
        store(row, i, ((loadX(base + i) - shift) - delta) * rstd * loadGamma(i) + loadBeta(i));
      // One writer per row; every lane holds the same delta and rstd.
      if (lane == 0) storeStats(row, shift + delta, rstd);
    }
  }
}
