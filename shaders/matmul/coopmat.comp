#version 450
// C = alpha·op(A)·op(B) + beta·C + bias on fragments (tensor cores, common/fragment.glsl):
// the operands are rounded to fp16 on their way into shared memory (or read as fp16 where they
// are stored so), multiplied 16x16x16 at a time by a warp, and summed in fp32.
//
// Assumptions, checked by the host (ops/matmul.cpp) before this kernel is chosen: the device
// has VK_NV_cooperative_matrix with a 16x16x16 fp16 x fp16 + fp32 subgroup shape, and a fixed
// subgroup size SG, so a workgroup of WM·WN·SG invocations is WM·WN whole subgroups (warps);
// or, for the emulated build matmul/coopmat.emu (the Coopmat variant's tests on lavapipe), fp16
// arithmetic and 16-bit storage, SG = 32 (a virtual warp). Everything here but the fragment
// calls is the same in both builds: the tiling, the staging and every barrier (FRAG_UNROLL
// only keeps the emulated build's loops rolled, for llvmpipe's compile time).
// fp16 holds up to 65504: larger f32 inputs become inf (ContextOptions::fp16_matmul).
//
// A workgroup owns a BM x BN tile of C, BM = WM·FM·16 and BN = WN·FN·16; warp (wm, wn)
// owns FM x FN fragments of 16x16 at rows wm·FM·16 and columns wn·FN·16 of the tile. Per BK
// step the workgroup stages op(A)'s BM x BK tile row-major (m, k) and op(B)'s BK x BN tile
// row-major (k, n) in shared memory as fp16, and every fragment is loaded row-major: on an
// H200 column-major fragment loads ran 3x slower (BENCHMARKS.md). An operand whose memory is
// contiguous along the tile's rows (A along k, B along n) is read four elements at a time
// along them; a transposed one (A along m, B along k) is read in 4x4 blocks, four reads of
// four along its contiguous axis, and transposed in registers on the way to shared memory.
// Two shared buffers: while the subgroups multiply one, every invocation's registers hold
// the next tile's global reads, stored into the other buffer after the multiplies, so one
// barrier per BK step separates writing a buffer from reading it.
// Rows of the shared tiles are padded by 8 halves (16 bytes) so that the 16-byte rows a
// fragment load reads at a time fall in different banks.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require
// C and the bias in any float format (LOAD / STORE); compiled also as matmul/coopmat.s16.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;

layout(constant_id = 0) const uint THREADS = 256;  // WM·WN·SG
layout(constant_id = 1) const uint SG = 32;        // lanes of a warp (the fixed subgroup size)
layout(constant_id = 2) const uint WM = 2;         // warps along M
layout(constant_id = 3) const uint WN = 4;         // warps along N
layout(constant_id = 4) const uint FM = 4;         // 16-row fragments per warp along M
layout(constant_id = 5) const uint FN = 2;         // 16-column fragments per warp along N
layout(constant_id = 6) const uint BK = 32;        // depth of a shared tile, a multiple of 16
// The operand's contiguous axis in memory: k for A (A_KCONTIG), n for B (B_NCONTIG);
// otherwise m for A, k for B (a transposed operand).
layout(constant_id = 7) const bool A_KCONTIG = true;
layout(constant_id = 8) const bool B_NCONTIG = true;
// Four elements along the contiguous axis per read: that axis's length a multiple of 4 and
// every row (and batch) starting on 4 elements.
layout(constant_id = 9) const bool A_VEC = false;
layout(constant_id = 10) const bool B_VEC = false;
// The operand is stored as fp16 (DType::F16) rather than fp32.
layout(constant_id = 11) const bool A_HALF = false;
layout(constant_id = 12) const bool B_HALF = false;

const uint BM = WM * FM * 16, BN = WN * FN * 16;

#define FRAG_WARPS (WM * WN)
#include "common/fragment.glsl"
const uint LDA = BK + 8, LDB = BN + 8;  // halves per shared row
// Groups of four elements along a shared row per tile (quads), and per invocation; a
// transposed operand moves 4x4 blocks, a quarter as many, each four quads once transposed.
const uint A_QUADS = BM * BK / 4, B_QUADS = BK * BN / 4;
const uint A_PER = A_KCONTIG ? (A_QUADS + THREADS - 1) / THREADS : 4 * ((A_QUADS / 4 + THREADS - 1) / THREADS);
const uint B_PER = B_NCONTIG ? (B_QUADS + THREADS - 1) / THREADS : 4 * ((B_QUADS / 4 + THREADS - 1) / THREADS);

// Each input binding seen as fp32, fp32 x 4, fp16 and fp16 x 4; the spec constants pick one.
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 0) readonly buffer AH { float16_t ah[]; };
layout(set = 0, binding = 0) readonly buffer AH4 { f16vec4 ah4[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 1) readonly buffer BH { float16_t bh[]; };
layout(set = 0, binding = 1) readonly buffer BH4 { f16vec4 bh4[]; };
FLOATS(2, c, )                // (batch,M,N), contiguous
FLOATS(3, bias, readonly)     // (N), if has_bias
// The Vector kernel's push constants (ops::MatmulPush's first fields): op(A)[z][m][k] =
// a[a_off + z*a_sb + m*a_sm + k*a_sk], in elements of the operand's own type; op(B) likewise.
layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_off, a_sm, a_sk, a_sb;
  uint b_off, b_sk, b_sn, b_sb;
  uint c_off;
  uint bias_off, has_bias;
  float alpha, beta;
} p;

// Two buffers of each tile, four halves per uvec2 (glslang 12 loads fp16 fragments from
// arrays of scalars or of 32-bit vectors, not of f16vec4). LDA and LDB are multiples of 8
// halves, so every fragment starts on 16 bytes, as cooperative matrix loads require.
shared uvec2 As[2 * BM * LDA / 4];
shared uvec2 Bs[2 * BK * LDB / 4];
// One 16x16 fp32 fragment per warp on its way out (the epilogue).
shared float Cs[WM * WN * 256];

f16vec4 ra[A_PER], rb[B_PER];  // the next tile's reads, in flight during the multiplies

// Element (row, k) of op(A) as fp16, 0 outside the product.
float16_t loadA(uint base, uint row, uint k) {
  if (row >= p.M || k >= p.K) return float16_t(0.0);
  const uint at = base + row * p.a_sm + k * p.a_sk;
  return A_HALF ? ah[at] : float16_t(a[at]);
}
float16_t loadB(uint base, uint k, uint col) {
  if (k >= p.K || col >= p.N) return float16_t(0.0);
  const uint at = base + k * p.b_sk + col * p.b_sn;
  return B_HALF ? bh[at] : float16_t(b[at]);
}

// Four elements of op(A) from (row, k) along m (across) or k, as fp16; 0 outside.
f16vec4 quadA(uint base, uint row, uint k, bool along_m) {
  const uint dr = along_m ? 1 : 0, dk = along_m ? 0 : 1;
  if (A_VEC) {
    // The contiguous axis's length is a multiple of 4: the quad is wholly in or out.
    if (row >= p.M || k >= p.K) return f16vec4(0.0);
    const uint at = (base + row * p.a_sm + k * p.a_sk) / 4;
    return A_HALF ? ah4[at] : f16vec4(a4[at]);
  }
  return f16vec4(loadA(base, row, k), loadA(base, row + dr, k + dk),
                 loadA(base, row + 2 * dr, k + 2 * dk), loadA(base, row + 3 * dr, k + 3 * dk));
}
// Four elements of op(B) from (k, col) along k (across) or n.
f16vec4 quadB(uint base, uint k, uint col, bool along_k) {
  const uint dk = along_k ? 1 : 0, dn = along_k ? 0 : 1;
  if (B_VEC) {
    if (k >= p.K || col >= p.N) return f16vec4(0.0);
    const uint at = (base + k * p.b_sk + col * p.b_sn) / 4;
    return B_HALF ? bh4[at] : f16vec4(b4[at]);
  }
  return f16vec4(loadB(base, k, col), loadB(base, k + dk, col + dn),
                 loadB(base, k + 2 * dk, col + 2 * dn), loadB(base, k + 3 * dk, col + 3 * dn));
}

// Where quad i of this invocation goes in a tile: its shared row and first element. Along:
// quad q = tid + i·THREADS is row q / (INNER/4), elements 4·(q % (INNER/4)) + 0..3. Across:
// 4x4 block q = tid + (i/4)·THREADS, its k quad fastest (a subgroup then reads whole 64-byte
// runs of four of the operand's rows), and quad i % 4 is the block's row 4·r4 + i % 4 (for A
// the rows are m and k runs along them; for B the rows are k).
uvec2 slot(uint tid, uint i, bool along, uint inner, bool rows_are_k) {
  if (along) {
    const uint q = tid + i * THREADS;
    return uvec2(q / (inner / 4), (q % (inner / 4)) * 4);
  }
  const uint q = tid + (i / 4) * THREADS;
  const uint k4 = q % (BK / 4), other4 = q / (BK / 4);
  return rows_are_k ? uvec2(4 * k4 + i % 4, 4 * other4) : uvec2(4 * other4 + i % 4, 4 * k4);
}

// Reads the tiles at depth k0 into ra / rb (quads of shared rows, transposed where across).
void fetch(uint tid, uint row0, uint col0, uint k0, uint abase, uint bbase) {
  [[unroll]] for (uint i = 0; i < A_PER; i += A_KCONTIG ? 1 : 4) {
    // A's shared rows are m and its elements k; across, the blocks run fastest along k.
    const uvec2 s = slot(tid, i, A_KCONTIG, BK, false);
    if (A_KCONTIG) {
      ra[i] = tid + i * THREADS < A_QUADS ? quadA(abase, row0 + s.x, k0 + s.y, false) : f16vec4(0.0);
      continue;
    }
    if (tid + (i / 4) * THREADS >= A_QUADS / 4) continue;
    // s.x = 4·r4 (the block's first row, i % 4 == 0 here): four quads along m at k .. k+3.
    f16vec4 col[4];
    [[unroll]] for (uint j = 0; j < 4; ++j) col[j] = quadA(abase, row0 + s.x, k0 + s.y + j, true);
    [[unroll]] for (uint r = 0; r < 4; ++r) ra[i + r] = f16vec4(col[0][r], col[1][r], col[2][r], col[3][r]);
  }
  [[unroll]] for (uint i = 0; i < B_PER; i += B_NCONTIG ? 1 : 4) {
    // B's shared rows are k and its elements n; across, the blocks run fastest along k too.
    const uvec2 s = slot(tid, i, B_NCONTIG, BN, true);
    if (B_NCONTIG) {
      rb[i] = tid + i * THREADS < B_QUADS ? quadB(bbase, k0 + s.x, col0 + s.y, false) : f16vec4(0.0);
      continue;
    }
    if (tid + (i / 4) * THREADS >= B_QUADS / 4) continue;
    f16vec4 col[4];  // four quads along k at n .. n+3
    [[unroll]] for (uint j = 0; j < 4; ++j) col[j] = quadB(bbase, k0 + s.x, col0 + s.y + j, true);
    [[unroll]] for (uint r = 0; r < 4; ++r) rb[i + r] = f16vec4(col[0][r], col[1][r], col[2][r], col[3][r]);
  }
}

uvec2 packed(f16vec4 v) {
  return uvec2(packFloat2x16(v.xy), packFloat2x16(v.zw));
}

void stash(uint tid, uint buf) {
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {
    const bool live = A_KCONTIG ? tid + i * THREADS < A_QUADS : tid + (i / 4) * THREADS < A_QUADS / 4;
    if (!live) continue;
    const uvec2 s = slot(tid, i, A_KCONTIG, BK, false);
    As[buf * (BM * LDA / 4) + (s.x * LDA + s.y) / 4] = packed(ra[i]);
  }
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {
    const bool live = B_NCONTIG ? tid + i * THREADS < B_QUADS : tid + (i / 4) * THREADS < B_QUADS / 4;
    if (!live) continue;
    const uvec2 s = slot(tid, i, B_NCONTIG, BN, true);
    Bs[buf * (BK * LDB / 4) + (s.x * LDB + s.y) / 4] = packed(rb[i]);
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = fragWarp(), lane = fragLane();
  const uint wm = sg / WN, wn = sg % WN;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint abase = p.a_off + z * p.a_sb, bbase = p.b_off + z * p.b_sb;

  FragF acc[FM][FN];
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = fragFillF(0.0);

  const uint steps = (p.K + BK - 1) / BK;
  fetch(tid, row0, col0, 0, abase, bbase);
  stash(tid, 0);
  // The first tiles must be complete before any warp reads them.
  barrier();
  for (uint s = 0; s < steps; ++s) {
    const uint buf = s & 1;
    if (s + 1 < steps) fetch(tid, row0, col0, (s + 1) * BK, abase, bbase);
    const uint a_buf = buf * (BM * LDA / 4), b_buf = buf * (BK * LDB / 4);
    FRAG_UNROLL for (uint kk = 0; kk < BK; kk += 16) {
      FragH fa[FM], fb[FN];
      FRAG_UNROLL for (uint i = 0; i < FM; ++i)
        FRAG_LOAD_H(fa[i], As, a_buf + ((wm * FM * 16 + i * 16) * LDA + kk) / 4, LDA / 4, false);
      FRAG_UNROLL for (uint j = 0; j < FN; ++j)
        FRAG_LOAD_H(fb[j], Bs, b_buf + (kk * LDB + wn * FN * 16 + j * 16) / 4, LDB / 4, false);
      FRAG_UNROLL for (uint i = 0; i < FM; ++i)
        FRAG_UNROLL for (uint j = 0; j < FN; ++j) acc[i][j] = fragMulAdd(fa[i], fb[j], acc[i][j]);
    }
    if (s + 1 < steps) stash(tid, buf ^ 1);
    // The other buffer is complete, and every warp is done with this one, before the
    // next step reads the former and (one step later) overwrites the latter.
    barrier();
  }

  // Each fragment goes through the warp's slice of Cs so that every element can be
  // checked against M and N and given alpha, beta and the bias.
  const uint cs = sg * 256;
  FRAG_UNROLL for (uint i = 0; i < FM; ++i)
    FRAG_UNROLL for (uint j = 0; j < FN; ++j) {
      FRAG_STORE_F(acc[i][j], Cs, cs, 16, false);
      // The fragment is spread over the warp's invocations: all of it must be in Cs
      // before any invocation reads another's part.
      fragWarpBarrier();
      const uint frow = row0 + wm * FM * 16 + i * 16, fcol = col0 + wn * FN * 16 + j * 16;
      for (uint e = lane; e < 256; e += SG) {
        const uint row = frow + e / 16, col = fcol + e % 16;
        if (row >= p.M || col >= p.N) continue;  // the last tiles may hang over M and N
        const uint at = p.c_off + (z * p.M + row) * p.N + col;
        float v = p.alpha * Cs[cs + e];
        if (p.beta != 0.0) v += p.beta * LOAD(c, at);  // beta == 0 must not read C: it may be NaN
        if (p.has_bias != 0) v += LOAD(bias, p.bias_off + col);
        STORE(c, at, v);
      }
      // Every invocation has read its part before the next fragment overwrites Cs.
      fragWarpBarrier();
    }
}
