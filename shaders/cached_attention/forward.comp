#version 450
#extension GL_GOOGLE_include_directive : require
// Attention of R new query rows over a key/value cache, for decoding: query row r of batch b
// and head h sees cache rows [0, position + r] of key/value head h / (H / Hkv) (grouped-query
// attention; Hkv = H for multi-head) (clamped to the cache), the causal rule of a
// window whose last R rows are these queries. position comes from a device buffer, so one
// recorded dispatch serves every step.
//
// One workgroup of W invocations per (r, h, b), W a power of two. Keys pass in chunks of
// CHUNK: each invocation scores its keys of the chunk (a dot product over D against q in
// shared memory) into shared memory, the workgroup reduces the chunk's max and sum in shared
// memory (no subgroup operations: any subgroup size), and each invocation owns output
// columns d = tid, tid + W, ..., updating them with the chunk's weights and value rows
// (online softmax, as the flash kernels do). Every tensor in any float format; the
// arithmetic is f32 and the reductions' order is fixed (the same bits on every run).
#include "common/storage.glsl"

layout(constant_id = 0) const uint D = 64;       // head dim
layout(constant_id = 1) const uint W = 64;       // invocations per workgroup, a power of two
layout(constant_id = 2) const uint CHUNK = 256;  // keys per pass through shared memory
layout(local_size_x_id = 1) in;

FLOATS(0, q, readonly)
FLOATS(1, k_cache, readonly)
FLOATS(2, v_cache, readonly)
FLOATS(3, o, writeonly)
#ifdef FOUR_STORAGE_BUFFERS
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads the
// position word through an R32UI texel view, which counts against the sampled-image limit;
// the float tensors stay storage buffers.
layout(set = 0, binding = 4) uniform usamplerBuffer position_texels;
#define POSITION(I) texelFetch(position_texels, int(I)).x
#else
layout(set = 0, binding = 4) readonly buffer Position { uint position[]; };
#define POSITION(I) position[I]
#endif

layout(push_constant) uniform Push {
  uint B, H, R, rows;
  float scale;
  uint q_stride, o_stride;  // elements between tokens of q and o
  uint skip[5];             // q, k_cache, v_cache, o, position
  uint Hkv;                 // the caches' heads: query head h reads h / (H / Hkv)
} p;

const uint COLS = (D + W - 1) / W;  // output columns per invocation

shared float qs[D];
shared float ps[CHUNK];  // the chunk's scores, then their weights
shared float red[W];

// The workgroup's max (is_max) or sum of each invocation's x, in a fixed order.
float reduce(float x, bool is_max) {
  const uint tid = gl_LocalInvocationID.x;
  red[tid] = x;
  barrier();
  for (uint half_ = W / 2; half_ > 0; half_ /= 2) {
    if (tid < half_) red[tid] = is_max ? max(red[tid], red[tid + half_]) : red[tid] + red[tid + half_];
    barrier();
  }
  const float all = red[0];
  barrier();  // red is free again
  return all;
}

void main() {
  const uint r = gl_WorkGroupID.x, h = gl_WorkGroupID.y, b = gl_WorkGroupID.z;
  const uint tid = gl_LocalInvocationID.x, HD = p.Hkv * D;  // HD: a cache row
  const uint qi = p.skip[0] + (b * p.R + r) * p.q_stride + h * D;
  for (uint d = tid; d < D; d += W) qs[d] = LOAD(q, qi + d) * p.scale;
  barrier();

  const uint keys = min(POSITION(p.skip[4]) + r + 1, p.rows);
  const uint hk = h / (p.H / p.Hkv);  // the key/value head (grouped-query attention)
  const uint cache0 = b * p.rows * HD + hk * D;  // element 0 of the head's row 0
  float m = uintBitsToFloat(0xff800000u), l = 0.0;  // running max (-inf) and sum
  float acc[COLS];
  for (uint c = 0; c < COLS; ++c) acc[c] = 0.0;

  for (uint j0 = 0; j0 < keys; j0 += CHUNK) {
    const uint n = min(CHUNK, keys - j0);
    float chunk_max = uintBitsToFloat(0xff800000u);
    for (uint c = tid; c < n; c += W) {
      const uint kj = p.skip[1] + cache0 + (j0 + c) * HD;
      float dot = 0.0;
      for (uint d = 0; d < D; ++d) dot += qs[d] * LOAD(k_cache, kj + d);
      ps[c] = dot;
      chunk_max = max(chunk_max, dot);
    }
    const float m_new = max(m, reduce(chunk_max, true));
    float chunk_sum = 0.0;
    for (uint c = tid; c < n; c += W) {
      const float e = exp(ps[c] - m_new);
      ps[c] = e;
      chunk_sum += e;
    }
    const float correction = exp(m - m_new);  // 0 on the first chunk (m = -inf)
    l = l * correction + reduce(chunk_sum, false);  // reduce's barriers publish ps too
    for (uint c = 0; c < COLS; ++c) {
      const uint d = tid + c * W;
      if (d >= D) break;
      float sum = acc[c] * correction;
      const uint vj = p.skip[2] + cache0 + j0 * HD + d;
      for (uint j = 0; j < n; ++j) sum += ps[j] * LOAD(v_cache, vj + j * HD);
      acc[c] = sum;
    }
    m = m_new;
    barrier();  // ps is read before the next chunk overwrites it
  }
  const float inv = l > 0.0 ? 1.0 / l : 0.0;
  const uint oi = p.skip[3] + (b * p.R + r) * p.o_stride + h * D;
  for (uint c = 0; c < COLS; ++c) {
    const uint d = tid + c * W;
    if (d < D) STORE(o, oi + d, acc[c] * inv);
  }
}
