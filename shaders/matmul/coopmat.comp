#version 450
// C = alpha·op(A)·op(B) + beta·C + bias on cooperative matrices (tensor cores): the operands
// are rounded to fp16 on their way into shared memory (or read as fp16 where they are stored
// so), multiplied 16x16x16 at a time by a subgroup, and summed in fp32.
//
// Assumptions, checked by the host (ops/matmul.cpp) before this kernel is chosen: the device
// has VK_NV_cooperative_matrix with a 16x16x16 fp16 x fp16 + fp32 subgroup shape, and a fixed
// subgroup size SG, so a workgroup of WM·WN·SG invocations is WM·WN whole subgroups.
//
// A workgroup owns a BM x BN tile of C, BM = WM·FM·16 and BN = WN·FN·16; subgroup (wm, wn)
// owns FM x FN fragments of 16x16 at rows wm·FM·16 and columns wn·FN·16 of the tile. Per BK
// step the workgroup stages op(A)'s BM x BK and op(B)'s BK x BN tiles in shared memory as
// fp16, each in its operand's own layout (the contiguous axis of global memory stays the
// contiguous axis in shared memory, so every global read is 16 (fp32) or 8 (fp16) bytes
// wide where A_VEC / B_VEC; a transposed operand is a column-major fragment, not a gather).
// Two shared buffers: while the subgroups multiply one, every invocation's registers hold
// the next tile's global reads, stored into the other buffer after the multiplies, so one
// barrier per BK step separates writing a buffer from reading it.
// Rows of the shared tiles are padded by 8 halves (16 bytes) so the 16 rows of a fragment
// start in different banks.
#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;

layout(constant_id = 0) const uint THREADS = 256;  // WM·WN·SG
layout(constant_id = 1) const uint SG = 32;        // the device's (fixed) subgroup size
layout(constant_id = 2) const uint WM = 2;         // subgroups along M
layout(constant_id = 3) const uint WN = 4;         // subgroups along N
layout(constant_id = 4) const uint FM = 4;         // 16-row fragments per subgroup along M
layout(constant_id = 5) const uint FN = 2;         // 16-column fragments per subgroup along N
layout(constant_id = 6) const uint BK = 32;        // depth of a shared tile, a multiple of 16
// The operand's contiguous axis in global memory: k for A (A_KMAJOR), n for B (B_NMAJOR);
// otherwise m for A, k for B (a transposed operand).
layout(constant_id = 7) const bool A_KMAJOR = true;
layout(constant_id = 8) const bool B_NMAJOR = true;
// Four elements along the contiguous axis per read: that axis's length a multiple of 4 and
// every row (and batch) starting on 4 elements.
layout(constant_id = 9) const bool A_VEC = false;
layout(constant_id = 10) const bool B_VEC = false;
// The operand is stored as fp16 (DType::F16) rather than fp32.
layout(constant_id = 11) const bool A_HALF = false;
layout(constant_id = 12) const bool B_HALF = false;

const uint BM = WM * FM * 16, BN = WN * FN * 16;
// A shared tile is OUTER rows of INNER halves along the contiguous axis, padded to LD.
const uint A_OUTER = A_KMAJOR ? BM : BK, A_INNER = A_KMAJOR ? BK : BM, LDA = A_INNER + 8;
const uint B_OUTER = B_NMAJOR ? BK : BN, B_INNER = B_NMAJOR ? BN : BK, LDB = B_INNER + 8;
// Groups of four elements per tile and per invocation (the host keeps these whole).
const uint A_QUADS = BM * BK / 4, B_QUADS = BK * BN / 4;
const uint A_PER = A_QUADS / THREADS, B_PER = B_QUADS / THREADS;

// Each input binding seen as fp32, fp32 x 4, fp16 and fp16 x 4; the spec constants pick one.
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(set = 0, binding = 0) readonly buffer AH { float16_t ah[]; };
layout(set = 0, binding = 0) readonly buffer AH4 { f16vec4 ah4[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(set = 0, binding = 1) readonly buffer BH { float16_t bh[]; };
layout(set = 0, binding = 1) readonly buffer BH4 { f16vec4 bh4[]; };
layout(set = 0, binding = 2) buffer C { float c[]; };  // (batch,M,N), contiguous
layout(set = 0, binding = 3) readonly buffer Bias { float bias[]; };  // (N), if has_bias
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
shared uvec2 As[2 * A_OUTER * LDA / 4];
shared uvec2 Bs[2 * B_OUTER * LDB / 4];
// One 16x16 fp32 fragment per subgroup on its way out (the epilogue).
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

// Reads the tiles at depth k0 into ra / rb: quad q of a tile is row q / (INNER/4) of its
// layout, elements 4·(q % (INNER/4)) .. +3 along the contiguous axis.
void fetch(uint tid, uint row0, uint col0, uint k0, uint abase, uint bbase) {
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {
    const uint q = tid + i * THREADS;
    const uint outer = q / (A_INNER / 4), inner = (q % (A_INNER / 4)) * 4;
    const uint row = row0 + (A_KMAJOR ? outer : inner), k = k0 + (A_KMAJOR ? inner : outer);
    if (A_VEC) {
      // The contiguous axis's length is a multiple of 4: the quad is wholly in or out.
      const bool in_range = row < p.M && k < p.K;
      const uint at = (abase + row * p.a_sm + k * p.a_sk) / 4;
      ra[i] = !in_range ? f16vec4(0.0) : A_HALF ? ah4[at] : f16vec4(a4[at]);
    } else {
      const uint dr = A_KMAJOR ? 0 : 1, dk = A_KMAJOR ? 1 : 0;
      ra[i] = f16vec4(loadA(abase, row, k), loadA(abase, row + dr, k + dk),
                      loadA(abase, row + 2 * dr, k + 2 * dk), loadA(abase, row + 3 * dr, k + 3 * dk));
    }
  }
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {
    const uint q = tid + i * THREADS;
    const uint outer = q / (B_INNER / 4), inner = (q % (B_INNER / 4)) * 4;
    const uint k = k0 + (B_NMAJOR ? outer : inner), col = col0 + (B_NMAJOR ? inner : outer);
    if (B_VEC) {
      const bool in_range = k < p.K && col < p.N;
      const uint at = (bbase + k * p.b_sk + col * p.b_sn) / 4;
      rb[i] = !in_range ? f16vec4(0.0) : B_HALF ? bh4[at] : f16vec4(b4[at]);
    } else {
      const uint dk = B_NMAJOR ? 0 : 1, dn = B_NMAJOR ? 1 : 0;
      rb[i] = f16vec4(loadB(bbase, k, col), loadB(bbase, k + dk, col + dn),
                      loadB(bbase, k + 2 * dk, col + 2 * dn), loadB(bbase, k + 3 * dk, col + 3 * dn));
    }
  }
}

uvec2 packed(f16vec4 v) {
  return uvec2(packFloat2x16(v.xy), packFloat2x16(v.zw));
}

void stash(uint tid, uint buf) {
  [[unroll]] for (uint i = 0; i < A_PER; ++i) {
    const uint q = tid + i * THREADS;
    const uint outer = q / (A_INNER / 4), inner = (q % (A_INNER / 4)) * 4;
    As[buf * (A_OUTER * LDA / 4) + (outer * LDA + inner) / 4] = packed(ra[i]);
  }
  [[unroll]] for (uint i = 0; i < B_PER; ++i) {
    const uint q = tid + i * THREADS;
    const uint outer = q / (B_INNER / 4), inner = (q % (B_INNER / 4)) * 4;
    Bs[buf * (B_OUTER * LDB / 4) + (outer * LDB + inner) / 4] = packed(rb[i]);
  }
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = tid / SG, lane = tid % SG;
  const uint wm = sg / WN, wn = sg % WN;
  const uint row0 = gl_WorkGroupID.y * BM, col0 = gl_WorkGroupID.x * BN;
  const uint z = gl_WorkGroupID.z;
  const uint abase = p.a_off + z * p.a_sb, bbase = p.b_off + z * p.b_sb;

  fcoopmatNV<32, gl_ScopeSubgroup, 16, 16> acc[FM][FN];
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>(0.0);

  const uint steps = (p.K + BK - 1) / BK;
  fetch(tid, row0, col0, 0, abase, bbase);
  stash(tid, 0);
  // The first tiles must be complete before any subgroup reads them.
  barrier();
  for (uint s = 0; s < steps; ++s) {
    const uint buf = s & 1;
    if (s + 1 < steps) fetch(tid, row0, col0, (s + 1) * BK, abase, bbase);
    const uint a_buf = buf * (A_OUTER * LDA / 4), b_buf = buf * (B_OUTER * LDB / 4);
    [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
      fcoopmatNV<16, gl_ScopeSubgroup, 16, 16> fa[FM], fb[FN];
      [[unroll]] for (uint i = 0; i < FM; ++i) {
        const uint m = wm * FM * 16 + i * 16;
        // Row-major (m, k) or, for an m-contiguous A, column-major (k, m).
        const uint at = A_KMAJOR ? m * LDA + kk : kk * LDA + m;
        coopMatLoadNV(fa[i], As, a_buf + at / 4, LDA / 4, !A_KMAJOR);
      }
      [[unroll]] for (uint j = 0; j < FN; ++j) {
        const uint n = wn * FN * 16 + j * 16;
        const uint at = B_NMAJOR ? kk * LDB + n : n * LDB + kk;
        coopMatLoadNV(fb[j], Bs, b_buf + at / 4, LDB / 4, !B_NMAJOR);
      }
      [[unroll]] for (uint i = 0; i < FM; ++i)
        [[unroll]] for (uint j = 0; j < FN; ++j) acc[i][j] = coopMatMulAddNV(fa[i], fb[j], acc[i][j]);
    }
    if (s + 1 < steps) stash(tid, buf ^ 1);
    // The other buffer is complete, and every subgroup is done with this one, before the
    // next step reads the former and (one step later) overwrites the latter.
    barrier();
  }

  // Each fragment goes through the subgroup's slice of Cs so that every element can be
  // checked against M and N and given alpha, beta and the bias.
  const uint cs = sg * 256;
  [[unroll]] for (uint i = 0; i < FM; ++i)
    [[unroll]] for (uint j = 0; j < FN; ++j) {
      coopMatStoreNV(acc[i][j], Cs, cs, 16, false);
      // The fragment is spread over the subgroup's invocations: all of it must be in Cs
      // before any invocation reads another's part.
      subgroupMemoryBarrierShared();
      subgroupBarrier();
      const uint frow = row0 + wm * FM * 16 + i * 16, fcol = col0 + wn * FN * 16 + j * 16;
      for (uint e = lane; e < 256; e += SG) {
        const uint row = frow + e / 16, col = fcol + e % 16;
        if (row >= p.M || col >= p.N) continue;  // the last tiles may hang over M and N
        const uint at = p.c_off + (z * p.M + row) * p.N + col;
        float v = p.alpha * Cs[cs + e];
        if (p.beta != 0.0) v += p.beta * c[at];  // beta == 0 must not read C: it may be NaN
        if (p.has_bias != 0) v += bias[p.bias_off + col];
        c[at] = v;
      }
      // Every invocation has read its part before the next fragment overwrites Cs.
      subgroupBarrier();
    }
}
