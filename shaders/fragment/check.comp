#version 450
// The fragment layer's own check (tests/vk/test_fragment.cpp), one workgroup of WARPS warps,
// each on its own 16x16 matrices: warp w reads a, b and c at w·256 (row-major fp32, a and b
// already fp16 values) and writes six results at out + (w·6 + j)·256, row-major:
//   0: c loaded and stored again                    (FRAG_LOAD_F, FRAG_STORE_F)
//   1: alpha·(a·b + c)                              (FRAG_LOAD_H, fragMulAdd, fragScaleF)
//   2: fp16(c)·b                                    (fragToH, fragFillF)
//   3: fill·b + c, then (alpha·a)·b in 4            (fragFillH, fragScaleH)
//   5: the coordinate hook's fragment, 16·row + col  (fragIndexF)
// and, through the hook, c with row r scaled by rows[w·16 + r] over result 0. After the six
// results, warp w's hook fragment as its lanes hold it (lane-major: lane l's element i at
// w·256 + l·FRAG_LENGTH + i), so a test sees the element order itself. Matrices go
// through shared memory with padded rows, row-major or transposed (CM: the fragments then
// load column-major), as a kernel stages them.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint THREADS = 64;  // WARPS·LANES
layout(constant_id = 1) const uint LANES = 32;    // lanes of a warp (32 in the emulated build)
layout(constant_id = 2) const uint WARPS = 2;
layout(constant_id = 3) const bool CM = false;  // matrices staged transposed

#define FRAG_WARPS WARPS
#define FRAG_INDEX
#include "common/fragment.glsl"

layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) readonly buffer C { float c[]; };
layout(set = 0, binding = 3) readonly buffer Rows { float rows[]; };
layout(set = 0, binding = 4) writeonly buffer Out { float out_[]; };
layout(push_constant) uniform Push {
  float alpha, fill_h, fill_f;
} p;

// Rows of 24 halves (6 uvec2s) and of 20 floats: padded, as the kernels pad theirs.
const uint LDH = 6, LDF = 20;
shared uvec2 As[WARPS * 16 * LDH], Bs[WARPS * 16 * LDH];
shared float Cs[WARPS * 16 * LDF];

// Element e = 16·row + col of a matrix staged at (row, col), or (col, row) when CM.
uint staged(uint e, uint ld) {
  return CM ? (e & 15) * ld + (e >> 4) : (e >> 4) * ld + (e & 15);
}

void main() {
  const uint w = fragWarp(), lane = fragLane(), in0 = w * 256;
  // Each lane stages whole uvec2s (four halves along a staged row), then single floats.
  for (uint q = lane; q < 64; q += LANES) {
    const uint row = q / 4, col4 = (q % 4) * 4;  // staged row, first of four staged columns
    vec4 va, vb;
    for (uint j = 0; j < 4; ++j) {
      const uint e = CM ? (col4 + j) * 16 + row : row * 16 + col4 + j;
      va[j] = a[in0 + e];
      vb[j] = b[in0 + e];
    }
    As[w * 16 * LDH + row * LDH + col4 / 4] = uvec2(packHalf2x16(va.xy), packHalf2x16(va.zw));
    Bs[w * 16 * LDH + row * LDH + col4 / 4] = uvec2(packHalf2x16(vb.xy), packHalf2x16(vb.zw));
  }
  for (uint e = lane; e < 256; e += LANES) Cs[w * 16 * LDF + staged(e, LDF)] = c[in0 + e];
  // The warp's matrices are whole in shared memory before its lanes load fragments of them.
  fragWarpBarrier();

  FragH fa, fb;
  FragF fc;
  FRAG_LOAD_H(fa, As, w * 16 * LDH, LDH, CM);
  FRAG_LOAD_H(fb, Bs, w * 16 * LDH, LDH, CM);
  FRAG_LOAD_F(fc, Cs, w * 16 * LDF, LDF, CM);

  FragF results[6];
  results[0] = fc;
  results[1] = fragScaleF(fragMulAdd(fa, fb, fc), p.alpha);
  results[2] = fragMulAdd(fragToH(fc), fb, fragFillF(0.0));
  results[3] = fragMulAdd(fragFillH(float16_t(p.fill_h)), fb, fragFillF(p.fill_f));
  results[4] = fragMulAdd(fragScaleH(fa, float16_t(p.alpha)), fb, fragFillF(0.0));
  const FragF index = fragIndexF();
  results[5] = index;
  // Row-wise work by the hook: each element finds its row, whatever the layout.
  FRAG_UNROLL for (int i = 0; i < FRAG_LENGTH(fc); ++i)
    FRAG_EL(results[0], i) *= rows[w * 16 + uint(FRAG_EL(index, i)) / 16];

  const uint out0 = w * 6 * 256;
  FRAG_UNROLL for (uint j = 0; j < 6; ++j) {
    // Every lane has read the last result from the warp's slice before it is overwritten.
    fragWarpBarrier();
    FRAG_STORE_F(results[j], Cs, w * 16 * LDF, LDF, false);
    // The result is whole in the slice before any lane copies another's elements out.
    fragWarpBarrier();
    for (uint e = lane; e < 256; e += LANES)
      out_[out0 + j * 256 + e] = Cs[w * 16 * LDF + (e >> 4) * LDF + (e & 15)];
  }
  const uint raw = WARPS * 6 * 256 + w * 256 + lane * FRAG_LENGTH(index);
  for (int i = 0; i < FRAG_LENGTH(index); ++i) out_[raw + i] = FRAG_EL(index, i);
}
