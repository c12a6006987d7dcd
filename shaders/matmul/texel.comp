#version 450
// C = alpha·op(A)·op(B) + beta·C + bias for SIMD CPUs (lavapipe/llvmpipe), where a
// workgroup is one subgroup and each subgroup lane is one lane of a vector register.
// docs/DESIGN.md has the measurements behind the recipe, BENCHMARKS.md the steps that changed it:
//  - A and B come through uniform texel buffers: a texelFetch is a branch-free gather
//    (a call into a small fetch function), while a storage-buffer load is scalarised per
//    lane with a bounds check.
//  - No shared memory and no barriers: every lane keeps a 16 x 8 block of C in registers
//    (TM x 4*TN4), and the workgroup tile is TM rows x 4*TN4*SG columns.
//  - All fetches of a BK = 4 step happen before its multiply-adds: a fetch is a call, and
//    a call clobbers every vector register.
//  - The TM rows of A are shared by all lanes: lane l fetches rows l, l+SG, ... and
//    subgroupShuffle with a constant lane index (a register broadcast on llvmpipe; every
//    loop below is unrolled, so the index is a compile-time constant) hands each row to the
//    others. subgroupBroadcast would be a slow loop.
//  - The multiply-adds go one row of C at a time: the row's 8 accumulators and its
//    broadcast A values fit the 16 vector registers (2-row blocks spill; BENCHMARKS.md).
//  - fma() is not fused on llvmpipe, so plain a*b+c is just as fast and portable.
//
// Operands are addressed through strides (push constants): op(A)[z][m][k] is element
// a_off + z*a_sb + m*a_sm + k*a_sk, and op(B) likewise, so a transpose or a broadcast (batch
// stride 0) costs no extra pipeline. How each operand is fetched is a spec constant the host
// picks from the strides and offsets:
//  - A_VEC4 / B_VEC4: RGBA32F views, one fetch per 4 contiguous k of a row of A (a_sk == 1)
//    or 4 contiguous columns of B (b_sn == 1, N % 4 == 0); every row must start on a 16-byte
//    texel (strides and start multiples of 4).
//  - A_MVEC4 (transposed A, stored (K,M), M % 4 == 0): one RGBA32F fetch holds 4 rows at one
//    k; the 16 texels of a step are spread over the lanes and each A value is handed out by
//    a scalar subgroupShuffle.
//  - B_KVEC4 (transposed B, stored (N,K), K % 4 == 0): one RGBA32F fetch holds 4 k of one
//    column; the 8 fetches of a step are regrouped by k in registers (~3x faster than 32
//    scalar fetches).
//  - otherwise R32F views with four strided scalar fetches per vec4.
// The k that do not fill a whole step (K % 4) go through a one-k-at-a-time loop after the
// main one, so no fetch ever needs a mask. One batch entry per z; the epilogue applies
// alpha, beta (C is read only with ACCUMULATE) and the bias.
// COLSUM: the column sums of op(B) over all of K as well, into colsum (N): a bias gradient
// beside the weight gradient (dW = Xᵀ·dY, dbias = Σ rows of dY, the same B operand), so it
// needs no pass of its own over dY. Every workgroup adds the B values it fetches anyway
// (8 adds per 128 multiply-adds); those of the first row of workgroups store. One batch entry.
// ACT_GRAD: C = f'(x) ⊙ (alpha·op(A)·op(B)) instead, x laid out as C: the backward of an
// activation y = f(x) folded into the product that computes dy (a kind whose derivative
// reads x; activation/activation.glsl). Overwrite only (no ACCUMULATE), no bias.
// RESIDUAL: C = alpha·op(A)·op(B) + bias + r (+ beta·C), r laid out as C: the residual add
// that follows a transformer block's projections, with no pass of its own. alpha·acc + bias
// + r is the order an add after the product would use, so the bits are the same.
// ACT_GRAD's x and RESIDUAL's r are the epilogue's operand (binding 5, one or the other).
// ACT_FWD: C = f(alpha·op(A)·op(B) + bias), an activation applied on the way out (the MLP's
// hidden layer), with the value before f stored to pre (binding 6, laid out as C) as well
// where ACT_FWD == 2 (f's backward reads it). activate() is the activation kernel's own, so
// the bits are those of the product followed by that pass. Overwrite only, no residual.
//
// 16-bit tensors (the ".s16" build, common/storage.glsl): A, B and the epilogue's operand are
// then read through unsigned views whatever their format (R32UI/RGBA32UI for f32, the bits;
// R16UI/RGBA16UI for f16 and bf16, widened exactly: a shift for bf16), one spec constant per
// operand picking the widening, and C, the bias, the column sums and pre are FLOATS bindings
// stored with one rounding each. A vec4 of a 16-bit operand is one 8-byte texel, so every
// fetch pattern above holds; 16-byte stores (C_VEC4) stay f32 only.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_GOOGLE_include_directive : require

#include "common/storage.glsl"

#define ACTIVATION_KIND_ID 8  // KIND: the activation of ACT_GRAD or ACT_FWD
#include "activation/activation.glsl"

layout(local_size_x_id = 0) in;  // exactly one subgroup
layout(constant_id = 0) const uint SG = 8;         // subgroup size (DeviceInfo::subgroup_size)
layout(constant_id = 1) const bool A_VEC4 = true;  // A bound as RGBA32F, else R32F
layout(constant_id = 2) const bool B_VEC4 = true;  // B bound as RGBA32F, else R32F
layout(constant_id = 3) const bool B_KVEC4 = false;  // B RGBA32F along k (b_sk == 1)
layout(constant_id = 4) const bool A_MVEC4 = false;  // A RGBA32F along m (a_sm == 1)
// beta != 0: C is read. A spec constant, not a branch on beta: the 128 unrolled storage loads
// (scalarised, bounds-checked) double the pipeline's JIT time, so only pipelines that
// accumulate pay for them.
layout(constant_id = 5) const bool ACCUMULATE = false;
// C stored (and, with ACCUMULATE, read) 16 bytes at a time: N % 4 == 0 and C's first element
// a multiple of 4 into its binding, so a lane's vec4 of columns is wholly inside or past N.
// Scalar storage stores are scalarised per lane with a bounds check on llvmpipe; a vec4
// store is about twice as fast per float (BENCHMARKS.md, copy).
layout(constant_id = 6) const bool C_VEC4 = false;
layout(constant_id = 7) const bool COLSUM = false;
layout(constant_id = 9) const bool ACT_GRAD = false;
// The epilogue's operand bound RGBA32F, one fetch per vec4 of C: N % 4 == 0 and its first
// element a multiple of 4.
layout(constant_id = 10) const bool EPI_VEC4 = false;
layout(constant_id = 11) const bool RESIDUAL = false;
layout(constant_id = 12) const uint ACT_FWD = 0;  // 0: none, 1: C = f(...), 2: and pre
// Rows of C per workgroup (all lanes hold all of them): 16, or M rounded up to a power of two
// where M is smaller (a decoding step's one-row products would otherwise compute 16 rows, 15
// of them clamped copies). At least 4 with A_MVEC4 (which needs M % 4 == 0). Each row's sums
// are the same whatever TM is: the bits do not change.
layout(constant_id = 13) const uint TM = 16;
const uint TN4 = 2;  // vec4 columns of C per lane: columns 8l .. 8l+7 of the tile for lane l
const uint BK = 4;   // k per step of the main loop: one RGBA32F texel of A
const uint SLOTS = (TM + SG - 1) / SG;  // rows of A each lane fetches

TEXELS(0, A)
TEXELS(1, B)
FLOATS(2, c, )  // (batch,M,N) from element c_off
layout(set = 0, binding = 2) buffer C4 { vec4 c4[]; };  // the same, with C_VEC4 (f32)
FLOATS(3, bias, readonly)                               // (N), if has_bias
// (N) from colsum_off, with COLSUM; otherwise a stand-in never touched.
FLOATS(4, colsum, )
// The epilogue's operand, x of ACT_GRAD or r of RESIDUAL (R32F or, with EPI_VEC4, RGBA32F;
// laid out as C from epi_off); otherwise a stand-in never fetched.
TEXELS(5, Epi)
// ACT_FWD == 2: the value before the activation, laid out as C from pre_off (16-byte stores
// with C_VEC4: the host asks both to allow them); otherwise a stand-in never touched.
FLOATS(6, pre, writeonly)
layout(set = 0, binding = 6) writeonly buffer Pre4 { vec4 pre4[]; };

layout(push_constant) uniform Push {
  uint M, N, K;
  uint a_off, a_sm, a_sk, a_sb;
  uint b_off, b_sk, b_sn, b_sb;
  uint c_off;
  uint bias_off, has_bias;
  float alpha, beta;
  uint k_chunk;  // the Vector variant's; unused here
  uint colsum_off;
  float colsum_beta;  // 0: colsum is written, 1: added to
  uint epi_off;
  float act_param;  // ACT_GRAD's or ACT_FWD's activation parameter (ops/activation.h)
  uint pre_off;
} p;

vec4 acc[TM][TN4];  // acc[r][j]: row row0 + r, columns col0 + 4j .. col0 + 4j + 3

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint row0 = gl_WorkGroupID.y * TM;
  const uint col0 = (gl_WorkGroupID.x * SG + lane) * 4 * TN4;
  const uint z = gl_WorkGroupID.z;

  // Rows and columns past the edge of C are clamped to the last one, so every fetch stays
  // inside its view (there is no robustBufferAccess); their results are never stored.
  uint a_first[SLOTS];  // element index of k = 0 in the rows this lane fetches
  [[unroll]] for (uint s = 0; s < SLOTS; ++s)
    a_first[s] = p.a_off + z * p.a_sb + min(row0 + lane + s * SG, p.M - 1) * p.a_sm;
  // A_MVEC4: texel t = lane + s*SG of a step holds rows 4(t/4) .. 4(t/4)+3 at k + t%4. With
  // M % 4 == 0 a group of 4 rows is wholly inside or wholly past M.
  uint a_group[SLOTS];
  [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
    const uint t = min(lane + s * SG, TM - 1);
    a_group[s] = p.a_off + z * p.a_sb + min(row0 + 4 * (t / 4), p.M - 4) + (t % 4) * p.a_sk;
  }
  // Element index of row k = 0 at this lane's vec4 columns. RGBA32F: N % 4 == 0, so a group
  // of 4 columns is wholly inside or wholly past N; R32F: each column is clamped.
  uint b_first[TN4][4];
  [[unroll]] for (uint j = 0; j < TN4; ++j)
    [[unroll]] for (uint i = 0; i < 4; ++i)
      b_first[j][i] = p.b_off + z * p.b_sb +
                      (B_VEC4 ? min(col0 + 4 * j, p.N - 4) + i
                              : min(col0 + 4 * j + i, p.N - 1) * p.b_sn);

  [[unroll]] for (uint r = 0; r < TM; ++r)
    [[unroll]] for (uint j = 0; j < TN4; ++j) acc[r][j] = vec4(0.0);
  vec4 csum[TN4];  // COLSUM: Σ over k of op(B) at this lane's columns
  [[unroll]] for (uint j = 0; j < TN4; ++j) csum[j] = vec4(0.0);

  const uint k_steps = p.K - p.K % BK;
  for (uint k = 0; k < k_steps; k += BK) {
    // a[s]: k .. k+3 of row lane + s*SG; b[kk][j]: row k+kk of B at vec4 column j.
    vec4 a[SLOTS];
    vec4 b[BK][TN4];
    [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
      if (A_MVEC4) {
        a[s] = FETCH(A, int((a_group[s] + k * p.a_sk) / 4));
      } else if (A_VEC4) {
        a[s] = FETCH(A, int((a_first[s] + k) / 4));
      } else {
        const uint at = a_first[s] + k * p.a_sk;
        a[s] = vec4(FETCH(A, int(at)).x, FETCH(A, int(at + p.a_sk)).x,
                    FETCH(A, int(at + 2 * p.a_sk)).x, FETCH(A, int(at + 3 * p.a_sk)).x);
      }
    }
    if (B_KVEC4) {
      [[unroll]] for (uint j = 0; j < TN4; ++j)
        [[unroll]] for (uint i = 0; i < 4; ++i) {
          const vec4 column = FETCH(B, int((b_first[j][i] + k) / 4));
          [[unroll]] for (uint kk = 0; kk < BK; ++kk) b[kk][j][i] = column[kk];
        }
    } else {
      [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
        const uint row = (k + kk) * p.b_sk;
        [[unroll]] for (uint j = 0; j < TN4; ++j) {
          if (B_VEC4) {
            b[kk][j] = FETCH(B, int((b_first[j][0] + row) / 4));
          } else {
            b[kk][j] = vec4(FETCH(B, int(b_first[j][0] + row)).x,
                            FETCH(B, int(b_first[j][1] + row)).x,
                            FETCH(B, int(b_first[j][2] + row)).x,
                            FETCH(B, int(b_first[j][3] + row)).x);
          }
        }
      }
    }
    if (COLSUM)
      [[unroll]] for (uint j = 0; j < TN4; ++j) {
        vec4 step = b[0][j];  // the step's BK rows first, then the running sum
        [[unroll]] for (uint kk = 1; kk < BK; ++kk) step += b[kk][j];
        csum[j] += step;
      }
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      vec4 ar;
      if (A_MVEC4) {
        [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
          const uint t = 4 * (r / 4) + kk;
          ar[kk] = subgroupShuffle(a[t / SG][r % 4], t % SG);
        }
      } else {
        ar = subgroupShuffle(a[r / SG], r % SG);
      }
      [[unroll]] for (uint kk = 0; kk < BK; ++kk)
        [[unroll]] for (uint j = 0; j < TN4; ++j) acc[r][j] += ar[kk] * b[kk][j];
    }
  }

  // The last K % 4 k, one at a time.
  for (uint k = k_steps; k < p.K; ++k) {
    float a[SLOTS];
    vec4 b[TN4];
    [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
      const uint at = a_first[s] + k * p.a_sk;
      a[s] = A_VEC4 || A_MVEC4 ? FETCH(A, int(at / 4))[at % 4] : FETCH(A, int(at)).x;
    }
    const uint row = k * p.b_sk;
    [[unroll]] for (uint j = 0; j < TN4; ++j) {
      if (B_VEC4) {
        b[j] = FETCH(B, int((b_first[j][0] + row) / 4));
      } else if (B_KVEC4) {  // never taken: B_KVEC4 needs K % 4 == 0
        [[unroll]] for (uint i = 0; i < 4; ++i)
          b[j][i] = FETCH(B, int((b_first[j][i] + k) / 4))[(b_first[j][i] + k) % 4];
      } else {
        b[j] = vec4(FETCH(B, int(b_first[j][0] + row)).x,
                    FETCH(B, int(b_first[j][1] + row)).x,
                    FETCH(B, int(b_first[j][2] + row)).x,
                    FETCH(B, int(b_first[j][3] + row)).x);
      }
    }
    if (COLSUM)
      [[unroll]] for (uint j = 0; j < TN4; ++j) csum[j] += b[j];
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      const float ar = subgroupShuffle(a[r / SG], r % SG);
      [[unroll]] for (uint j = 0; j < TN4; ++j) acc[r][j] += ar * b[j];
    }
  }

  // The first row of workgroups stores the column sums; the columns past N were clamped copies.
  if (COLSUM && gl_WorkGroupID.y == 0)
    [[unroll]] for (uint j = 0; j < TN4; ++j)
      [[unroll]] for (uint i = 0; i < 4; ++i) {
        const uint col = col0 + 4 * j + i;
        if (col >= p.N) continue;
        const uint at = p.colsum_off + col;
        STORE(colsum, at,
              p.colsum_beta != 0.0 ? csum[j][i] + p.colsum_beta * LOAD(colsum, at) : csum[j][i]);
      }

  // The bias of this lane's columns, loaded once for all TM rows. Without a bias the binding
  // is a 4-byte stand-in: every load reads its one element and the value is dropped. Selects,
  // not a branch: a branch here measured a few % slower main loop (BENCHMARKS.md).
  vec4 bias4[TN4];
  [[unroll]] for (uint j = 0; j < TN4; ++j)
    [[unroll]] for (uint i = 0; i < 4; ++i) {
      const uint col = p.has_bias != 0 ? min(col0 + 4 * j + i, p.N - 1) : 0;
      const float value = LOAD(bias, p.bias_off + col);
      bias4[j][i] = p.has_bias != 0 ? value : 0.0;
    }

  [[unroll]] for (uint r = 0; r < TM; ++r) {
    const uint row = row0 + r;
    if (row >= p.M) break;  // rows past M were computed from clamped copies of row M-1
    [[unroll]] for (uint j = 0; j < TN4; ++j) {
      const uint col = col0 + 4 * j;
      const uint at = p.c_off + (z * p.M + row) * p.N + col;
      vec4 v = p.alpha * acc[r][j] + bias4[j];
      if (ACT_FWD != 0) {
        const uint pre_at = p.pre_off + (z * p.M + row) * p.N + col;
        if (ACT_FWD == 2 && C_VEC4 && col < p.N) pre4[pre_at / 4] = v;
        if (ACT_FWD == 2 && !C_VEC4)
          [[unroll]] for (uint i = 0; i < 4; ++i)
            if (col + i < p.N) STORE(pre, pre_at + i, v[i]);
        // f reads the value as stored (pre, else C, where the pass after runs in place).
        const uint stored = ACT_FWD == 2 ? pre_dtype : c_dtype;
        [[unroll]] for (uint i = 0; i < 4; ++i)
          v[i] = activate(roundToFormat(v[i], stored), p.act_param);
      }
      // Only columns inside N are fetched (a clamped one would read past the operand's rows).
      const uint e_at = p.epi_off + (z * p.M + row) * p.N + col;
      if (ACT_GRAD) {
        // f'(x) scales the product as stored in C, as the pass after would read it.
        [[unroll]] for (uint i = 0; i < 4; ++i) v[i] = roundToFormat(v[i], c_dtype);
        if (EPI_VEC4 && col < p.N) {
          const vec4 x = FETCH(Epi, int(e_at / 4));
          [[unroll]] for (uint i = 0; i < 4; ++i)
            v[i] = activationGrad(x[i], 0.0, v[i], p.act_param);
        } else if (!EPI_VEC4) {
          [[unroll]] for (uint i = 0; i < 4; ++i)
            if (col + i < p.N)
              v[i] = activationGrad(FETCH(Epi, int(e_at + i)).x, 0.0, v[i], p.act_param);
        }
      }
      if (RESIDUAL) {
        if (EPI_VEC4 && col < p.N) {
          v += FETCH(Epi, int(e_at / 4));
        } else if (!EPI_VEC4) {
          [[unroll]] for (uint i = 0; i < 4; ++i)
            if (col + i < p.N) v[i] += FETCH(Epi, int(e_at + i)).x;
        }
      }
      if (C_VEC4) {
        if (col >= p.N) continue;
        c4[at / 4] = ACCUMULATE ? v + p.beta * c4[at / 4] : v;
        continue;
      }
      [[unroll]] for (uint i = 0; i < 4; ++i) {
        if (col + i >= p.N) continue;  // columns past N were clamped copies
        // Without ACCUMULATE (beta == 0) C is not read: it may hold anything, NaN included.
        STORE(c, at + i, ACCUMULATE ? v[i] + p.beta * LOAD(c, at + i) : v[i]);
      }
    }
  }
}
