#version 450
// Softmax backward from the saved output y: dx (= or +=) y * (dy - sum(dy * y)) along each
// row. Each row of y and dy is read twice (the dot product, then the output).
// Layouts: softmax/rows.glsl. dx may be exactly y or dy: every element is read before the
// invocation that reads it last writes it. Tensors in any float format
// (common/storage.glsl): the dot product and the arithmetic are f32.
//
// kVec4 (with kTexelInput, a workgroup or subgroup per row, N % 4 == 0, y and dy 16-byte
// aligned): RGBA32F texels of 4 adjacent columns, and with kStore4 (dx f32 and its skip a
// multiple of 4) dx loaded (kAccumulate) and stored 16 bytes at a time, as in forward.comp;
// with kLaneTexels (rows of up to 128 texels a lane on CPU devices, 32 elsewhere) each texel of
// y and dy fetched once. On lavapipe at 10240 x 1024 that runs at the copy kernel's rate, 4.5x
// the scalar layout; at 4096 x 4096 holding rows ran 1.27-1.6x faster than reading twice
// (BENCHMARKS.md, softmax).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_EXT_control_flow_attributes : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(constant_id = 4) const bool kAccumulate = false;

#include "softmax/rows.glsl"

layout(constant_id = 5) const bool kVec4 = false;    // only with kTexelInput, not per invocation
layout(constant_id = 6) const bool kStore4 = false;  // only with kVec4
// With kVec4: the texels of a row each lane holds (forward.comp), or 0.
layout(constant_id = 7) const uint kLaneTexels = 0;

FLOATS(0, y, readonly)                                           // (rows, N) from y_skip
layout(set = 0, binding = 1) uniform samplerBuffer y_texels;      // the same, if kTexelInput (f32)
FLOATS(2, dy, readonly)                                          // (rows, N) from dy_skip
layout(set = 0, binding = 3) uniform samplerBuffer dy_texels;     // the same, if kTexelInput (f32)
FLOATS(4, dx, )  // (rows, N); not writeonly: kAccumulate reads it
layout(set = 0, binding = 4) buffer DX4 { vec4 dx4[]; };  // the same, kStore4 (f32)
layout(push_constant) uniform Push {
  uint rows;  // numel / N
  uint n;     // >= 1
  uint y_skip, dy_skip, dx_skip;  // first elements inside the bindings (ops/binding.h)
} p;

float loadY(uint i) {
  return kTexelInput ? texelFetch(y_texels, int(p.y_skip + i)).x : LOAD(y, p.y_skip + i);
}
float loadDy(uint i) {
  return kTexelInput ? texelFetch(dy_texels, int(p.dy_skip + i)).x : LOAD(dy, p.dy_skip + i);
}

// Texel t of the 4-column views (kVec4: y_skip and dy_skip % 4 == 0).
vec4 fetchY4(uint t) { return texelFetch(y_texels, int(p.y_skip / 4 + t)); }
vec4 fetchDy4(uint t) { return texelFetch(dy_texels, int(p.dy_skip / 4 + t)); }

// dx's texel t (=|+=) d.
void writeDx4(uint t, vec4 d) {
  if (kStore4) {
    const uint at = p.dx_skip / 4 + t;
    dx4[at] = kAccumulate ? dx4[at] + d : d;
  } else {
    for (uint k = 0; k < 4; ++k) {
      const uint at = p.dx_skip + 4 * t + k;
      STORE(dx, at, kAccumulate ? LOAD(dx, at) + d[k] : d[k]);
    }
  }
}

// One row with 4 columns per fetch (kVec4): each lane's four columns of the dot product
// compensated apart and added up before the row sum.
void row4(uint row, uint first, uint step) {
  const uint n4 = p.n / 4, base4 = row * n4;
  Kahan4 dot = kKahan4Zero;
  // t < n4: idle lanes contribute 0.
  for (uint t = first; t < n4; t += step)
    dot = kahan4Add(dot, fetchDy4(base4 + t) * fetchY4(base4 + t));
  const vec4 d4 = kahan4Value(dot);
  const float s = rowSum((d4.x + d4.y) + (d4.z + d4.w));
  for (uint t = first; t < n4; t += step)
    writeDx4(base4 + t, fetchY4(base4 + t) * (fetchDy4(base4 + t) - s));
}

// row4 with the lane's texels of y and dy fetched once and held (kLaneTexels > 0), as in
// forward.comp: only a lane's last texel can lie past the row, and the dot product sums blocks
// of 32 texels.
void row4Held(uint row, uint first, uint step) {
  const uint n4 = p.n / 4, base4 = row * n4;
  vec4 y4[kLaneTexels == 0 ? 1 : kLaneTexels], dy4[kLaneTexels == 0 ? 1 : kLaneTexels];
  vec4 dot4 = vec4(0.0), block = vec4(0.0);
  [[unroll]] for (uint i = 0; i < kLaneTexels; ++i) {
    const uint t = first + i * step;
    // t < n4 (the last texel only): past the row 0, which adds nothing.
    const bool in_row = i + 1 < kLaneTexels || t < n4;
    y4[i] = in_row ? fetchY4(base4 + t) : vec4(0.0);
    dy4[i] = in_row ? fetchDy4(base4 + t) : vec4(0.0);
    block += dy4[i] * y4[i];
    if (i % 32 == 31) {  // unrolled: no branch, a block of 32 texels ends here
      dot4 += block;
      block = vec4(0.0);
    }
  }
  dot4 += block;
  const float s = rowSum((dot4.x + dot4.y) + (dot4.z + dot4.w));
  [[unroll]] for (uint i = 0; i < kLaneTexels; ++i) {
    const uint t = first + i * step;
    if (i + 1 < kLaneTexels || t < n4) writeDx4(base4 + t, y4[i] * (dy4[i] - s));
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
  Kahan dot = kKahanZero;
  for (uint i = first; i < p.n; i += step) dot = kahanAdd(dot, loadDy(base + i) * loadY(base + i));
  const float s = rowSum(kahanValue(dot));
  for (uint i = first; i < p.n; i += step) {
    float d = loadY(base + i) * (loadDy(base + i) - s);
    if (kAccumulate) d += LOAD(dx, p.dx_skip + base + i);
    STORE(dx, p.dx_skip + base + i, d);
  }
}

void main() { forEachRow(p.rows); }
