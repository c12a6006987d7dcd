#version 450
// Layer norm backward, parameter gradients: column sums over rows,
//   dgamma[c] = sum_r dy[r,c] * xhat[r,c],  dbeta[c] = sum_r dy[r,c],
// xhat = (x - mean[r]) * rstd[r] from the saved statistics. One invocation per column and
// block of p.block_rows rows; adjacent invocations take adjacent columns, which are adjacent
// in memory. A block's sums go to out[skip + block * n + c]: with one block that is dgamma
// and dbeta themselves (= or += with kAccumulate), with several it is a scratch buffer that
// backward_reduce.comp then sums over blocks. Sums run in row order, compensated, so the
// same input gives the same bits; no atomics.
//
// kTexelInput: x and dy read through texel buffers (bindings 1, 3) instead of the storage
// buffers 0, 2: R32F, or with kVec4 RGBA32F, where each invocation takes 4 adjacent columns
// (N % 4 == 0 and both views 16-byte aligned: skips are multiples of 4). kGamma, kBeta: whether that output is wanted (an unwanted one is
// bound to a placeholder and never written). Every binding starts at the device's alignment
// at or below its view, and `*_skip` elements into it is the view's first element.
// The storage bindings hold any float format (common/storage.glsl), each as its view says
// (the scratch partials are f32); texels are f32, and every sum is.
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads mean and
// rstd through one-component texel views (FLOATS_OR_TEXELS): x, dy and the two outputs remain.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kTexelInput = false;
layout(constant_id = 2) const bool kAccumulate = false;
layout(constant_id = 3) const bool kGamma = true;
layout(constant_id = 4) const bool kBeta = true;
layout(constant_id = 5) const bool kVec4 = false;  // only with kTexelInput

#include "common/kahan.glsl"

FLOATS(0, x, readonly)                                         // (rows, N)
layout(set = 0, binding = 1) uniform samplerBuffer x_texels;   // (rows, N)
FLOATS(2, dy, readonly)                                        // (rows, N)
layout(set = 0, binding = 3) uniform samplerBuffer dy_texels;  // (rows, N)
FLOATS_OR_TEXELS(4, mean)                                      // (rows)
FLOATS_OR_TEXELS(5, rstd)                                      // (rows)
// (blocks, N) each; not writeonly: kAccumulate reads them.
FLOATS(6, out_gamma, )
FLOATS(7, out_beta, )
layout(push_constant) uniform Push {
  uint rows;        // numel / N
  uint n;           // columns
  uint block_rows;  // rows per block, >= 1
  uint blocks;      // ceil(rows / block_rows)
  uint x_skip, dy_skip, mean_skip, rstd_skip, gamma_skip, beta_skip;
} p;

float loadX(uint i) {
  return kTexelInput ? texelFetch(x_texels, int(p.x_skip + i)).x : LOAD(x, p.x_skip + i);
}
float loadDy(uint i) {
  return kTexelInput ? texelFetch(dy_texels, int(p.dy_skip + i)).x : LOAD(dy, p.dy_skip + i);
}

void store(uint at, float gx, float g) {
  if (kGamma) {
    if (kAccumulate) gx += LOAD(out_gamma, p.gamma_skip + at);
    STORE(out_gamma, p.gamma_skip + at, gx);
  }
  if (kBeta) {
    if (kAccumulate) g += LOAD(out_beta, p.beta_skip + at);
    STORE(out_beta, p.beta_skip + at, g);
  }
}

void main() {
  // Grid-stride in both directions: the host caps the grid.
  const uint col_stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint block = gl_WorkGroupID.y; block < p.blocks; block += gl_NumWorkGroups.y) {
    const uint begin = block * p.block_rows;
    const uint end = min(p.rows, begin + p.block_rows);  // the last block may be short
    if (kVec4) {
      // One fetch of x and one of dy per row and 4 columns, and one of mean and rstd per row
      // instead of per column: ~3x faster than R32F on lavapipe.
      const uint n4 = p.n / 4, x4 = p.x_skip / 4, dy4 = p.dy_skip / 4;
      // c < n / 4: the grid is rounded up to whole workgroups (no barriers in this shader).
      for (uint c = gl_GlobalInvocationID.x; c < n4; c += col_stride) {
        Kahan4 sum_gx = kKahan4Zero, sum_g = kKahan4Zero;
        for (uint r = begin; r < end; ++r) {
          const vec4 d = texelFetch(dy_texels, int(dy4 + r * n4 + c));
          const vec4 xhat = (texelFetch(x_texels, int(x4 + r * n4 + c)) -
                             LOAD_OR_FETCH(mean, p.mean_skip + r)) *
                            LOAD_OR_FETCH(rstd, p.rstd_skip + r);
          sum_gx = kahan4Add(sum_gx, d * xhat);
          sum_g = kahan4Add(sum_g, d);
        }
        const vec4 gx = kahan4Value(sum_gx), g = kahan4Value(sum_g);
        for (uint k = 0; k < 4; ++k) store(block * p.n + 4 * c + k, gx[k], g[k]);
      }
      continue;
    }
    // c < n: the grid is rounded up to whole workgroups (no barriers in this shader).
    for (uint c = gl_GlobalInvocationID.x; c < p.n; c += col_stride) {
      Kahan sum_gx = kKahanZero, sum_g = kKahanZero;
      for (uint r = begin; r < end; ++r) {
        const float d = loadDy(r * p.n + c);
        const float xhat =
            (loadX(r * p.n + c) - LOAD_OR_FETCH(mean, p.mean_skip + r)) * LOAD_OR_FETCH(rstd, p.rstd_skip + r);
        sum_gx = kahanAdd(sum_gx, d * xhat);
        sum_g = kahanAdd(sum_g, d);
      }
      store(block * p.n + c, kahanValue(sum_gx), kahanValue(sum_g));
    }
  }
}
