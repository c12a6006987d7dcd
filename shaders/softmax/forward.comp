#version 450
// Row-wise softmax over the last axis: y = exp(x - max) / sum(exp(x - max)), with the
// (max, sum) pair gathered online so each row is read twice (statistics, then output),
// not three times. A row that is all -inf gives zeros. Layouts: softmax/rows.glsl. x and y in
// any float format (common/storage.glsl): the arithmetic is f32.
//
// kVec4 (with kTexelInput, a workgroup or subgroup per row, N % 4 == 0 and x 16-byte aligned):
// RGBA32F texels of 4 adjacent columns, a quarter of the fetches, and with kStore4 (y f32 and
// its skip a multiple of 4) y stored 16 bytes at a time, as the copy kernel does. There the
// online pair gives way to a maximum first: with kLaneTexels (rows of up to 128 texels a lane
// on CPU devices, 32 elsewhere; ops/softmax.cpp) each lane fetches its texels once and keeps
// them, then exp(x - max) once per value; longer rows are read three times (max, sum of
// exp(x - max), output), where a fetch costs less than the online pair's rescaling. Measured
// on lavapipe at 10240 x 1024 (BENCHMARKS.md, softmax): without its exp the kernel costs about
// 1.0-1.1x the copy kernel's CPU time and llvmpipe's exp adds ~0.4x (a hand-written degree-5
// polynomial exp cost 1.2x as much as llvmpipe's), so ~70 % of the copy's rate is the floor
// here; the scalar layout ran at 20 %.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

#include "softmax/rows.glsl"

layout(constant_id = 4) const bool kVec4 = false;    // only with kTexelInput, not per invocation
layout(constant_id = 5) const bool kStore4 = false;  // only with kVec4
// With kVec4: the texels of a row each lane holds (ceil(N / 4 / lanes), at most 32), or 0: the
// row is then fetched three times instead of once.
layout(constant_id = 6) const uint kLaneTexels = 0;

FLOATS(0, x, readonly)                                       // (rows, N) from x_skip
layout(set = 0, binding = 1) uniform samplerBuffer x_texels;  // the same, if kTexelInput (f32)
FLOATS(2, y, writeonly)                                      // (rows, N) from y_skip
layout(set = 0, binding = 2) writeonly buffer Y4 { vec4 y4[]; };  // the same, kStore4 (f32)
layout(push_constant) uniform Push {
  uint rows;    // numel / N
  uint n;       // length of the last axis, >= 1
  uint x_skip;  // first element of x inside its bindings (see ops/binding.h)
  uint y_skip;
} p;

float loadX(uint i) {
  return kTexelInput ? texelFetch(x_texels, int(p.x_skip + i)).x : LOAD(x, p.x_skip + i);
}

// Texel t of x's 4-column view (kVec4: x_skip % 4 == 0).
vec4 fetchX4(uint t) { return texelFetch(x_texels, int(p.x_skip / 4 + t)); }

void storeY4(uint t, vec4 v) {
  if (kStore4) {
    y4[p.y_skip / 4 + t] = v;
  } else {
    for (uint k = 0; k < 4; ++k) STORE(y, p.y_skip + 4 * t + k, v[k]);
  }
}

// One row with 4 columns per fetch (kVec4): the maximum, then the sum of exp(x - max) (each
// lane's four columns compensated apart and added up before the row sum), then the output.
void row4(uint row, uint first, uint step) {
  const uint n4 = p.n / 4, base4 = row * n4;
  // Idle lanes (t < n4 fails at once) keep -inf and 0, which the row max and sum ignore.
  vec4 m4 = vec4(kNegInf);
  for (uint t = first; t < n4; t += step) m4 = max(m4, fetchX4(base4 + t));
  const float m = rowMax(max(max(m4.x, m4.y), max(m4.z, m4.w)));
  if (m == kNegInf) {
    // All -inf: zeros, where exp(x - m) / s would be NaN.
    for (uint t = first; t < n4; t += step) storeY4(base4 + t, vec4(0.0));
    return;
  }
  Kahan4 sum = kKahan4Zero;
  for (uint t = first; t < n4; t += step) sum = kahan4Add(sum, exp(fetchX4(base4 + t) - m));
  const vec4 s4 = kahan4Value(sum);
  const float inv_sum = 1.0 / rowSum((s4.x + s4.y) + (s4.z + s4.w));
  for (uint t = first; t < n4; t += step)
    storeY4(base4 + t, exp(fetchX4(base4 + t) - m) * inv_sum);
}

// row4 with the lane's texels fetched once and held in registers (kLaneTexels > 0: the row's
// texels over the lanes, rounded up). Only a lane's last texel can lie past the row, so the
// others need no bounds guard: on lavapipe the guards cost a third of the kernel. Each column of
// a lane sums its texels in blocks of 32 (plain fp32 sums of 32 values are as good as
// compensated ones), then the blocks: two accumulators, where more would spill.
void row4Held(uint row, uint first, uint step) {
  const uint n4 = p.n / 4, base4 = row * n4;
  vec4 v[kLaneTexels == 0 ? 1 : kLaneTexels];
  vec4 m4 = vec4(kNegInf);
  [[unroll]] for (uint i = 0; i < kLaneTexels; ++i) {
    const uint t = first + i * step;
    // t < n4 (the last texel only): past the row -inf, which adds nothing below.
    v[i] = i + 1 < kLaneTexels || t < n4 ? fetchX4(base4 + t) : vec4(kNegInf);
    m4 = max(m4, v[i]);
  }
  const float m = rowMax(max(max(m4.x, m4.y), max(m4.z, m4.w)));
  // All -inf: inv_sum is 0 and the shift 0 (exp(-inf - 0) = 0, where -inf - m would be NaN),
  // so the stores write zeros with no select.
  const bool masked = m == kNegInf;
  const float shift = masked ? 0.0 : m;
  vec4 l4 = vec4(0.0), block = vec4(0.0);
  [[unroll]] for (uint i = 0; i < kLaneTexels; ++i) {
    v[i] = exp(v[i] - shift);
    block += v[i];
    if (i % 32 == 31) {  // unrolled: no branch, a block of 32 texels ends here
      l4 += block;
      block = vec4(0.0);
    }
  }
  l4 += block;
  const float inv_sum = masked ? 0.0 : 1.0 / rowSum((l4.x + l4.y) + (l4.z + l4.w));
  [[unroll]] for (uint i = 0; i < kLaneTexels; ++i) {
    const uint t = first + i * step;
    if (i + 1 < kLaneTexels || t < n4) storeY4(base4 + t, v[i] * inv_sum);
  }
}

void processRow(uint row, uint first, uint step) {
  if (kVec4 && kLaneTexels > 0) {
    row4Held(row, first, step);
    return;
  }
  if (kVec4) {
    row4(row, first, step);
    return;
  }
  const uint base = row * p.n;
  MaxSumAcc acc = kMaxSumAccEmpty;
  // i < n: the row need not be a multiple of the step; idle lanes keep the empty pair,
  // which the combine ignores.
  for (uint i = first; i < p.n; i += step) acc = maxSumAccAdd(acc, loadX(base + i));
  const MaxSum stats = rowMaxSum(maxSumAccResult(acc));
  if (stats.m == kNegInf) {
    // All -inf (s = 0): zeros, where exp(x - m) / s would be NaN.
    for (uint i = first; i < p.n; i += step) STORE(y, p.y_skip + base + i, 0.0);
    return;
  }
  const float inv_sum = 1.0 / stats.s;
  for (uint i = first; i < p.n; i += step)
    STORE(y, p.y_skip + base + i, exp(loadX(base + i) - stats.m) * inv_sum);
}

void main() { forEachRow(p.rows); }
