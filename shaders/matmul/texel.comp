#version 450
// C = A·B for SIMD CPUs (lavapipe/llvmpipe), where a workgroup is one subgroup and each
// subgroup lane is one lane of a vector register. DESIGN.md has the measurements behind the
// recipe, BENCHMARKS.md the steps that changed it:
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
// Whole-vec4 fetches need every row of a tensor to start on a texel (16 bytes): for A that
// is K % 4 == 0 and a 16-byte-aligned start, for B N % 4 == 0 and the same. A_VEC4/B_VEC4
// choose, per operand, between RGBA32F views (one fetch per 4 floats) and R32F views with
// four scalar fetches; the host sets them from the shapes and offsets. The k that do not
// fill a whole step (K % 4, so never with A_VEC4) go through a one-k-at-a-time loop after
// the main one, so no fetch ever needs a mask.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

layout(local_size_x_id = 0) in;  // exactly one subgroup
layout(constant_id = 0) const uint SG = 8;         // subgroup size (DeviceInfo::subgroup_size)
layout(constant_id = 1) const bool A_VEC4 = true;  // A bound as RGBA32F, else R32F
layout(constant_id = 2) const bool B_VEC4 = true;  // B bound as RGBA32F, else R32F

const uint TM = 16;  // rows of C per workgroup (all lanes hold all of them)
const uint TN4 = 2;  // vec4 columns of C per lane: columns 8l .. 8l+7 of the tile for lane l
const uint BK = 4;   // k per step of the main loop: one RGBA32F texel of A
const uint SLOTS = (TM + SG - 1) / SG;  // rows of A each lane fetches

layout(set = 0, binding = 0) uniform samplerBuffer A;  // (M,K), starting at element a_off
layout(set = 0, binding = 1) uniform samplerBuffer B;  // (K,N), starting at element b_off
layout(set = 0, binding = 2) writeonly buffer C { float c[]; };  // (M,N) from element c_off
layout(push_constant) uniform Push { uint M, N, K, a_off, b_off, c_off; } p;

vec4 acc[TM][TN4];  // acc[r][j]: row row0 + r, columns col0 + 4j .. col0 + 4j + 3

void main() {
  const uint lane = gl_SubgroupInvocationID;
  const uint row0 = gl_WorkGroupID.y * TM;
  const uint col0 = (gl_WorkGroupID.x * SG + lane) * 4 * TN4;

  // Rows and columns past the edge of C are clamped to the last one, so every fetch stays
  // inside its view (there is no robustBufferAccess); their results are never stored.
  uint a_first[SLOTS];  // element index of k = 0 in the rows this lane fetches
  [[unroll]] for (uint s = 0; s < SLOTS; ++s)
    a_first[s] = p.a_off + min(row0 + lane + s * SG, p.M - 1) * p.K;
  // Element index of row k = 0 at this lane's vec4 columns. RGBA32F: N % 4 == 0, so a group
  // of 4 columns is wholly inside or wholly past N; R32F: each column is clamped.
  uint b_first[TN4][4];
  [[unroll]] for (uint j = 0; j < TN4; ++j)
    [[unroll]] for (uint i = 0; i < 4; ++i)
      b_first[j][i] = p.b_off + (B_VEC4 ? min(col0 + 4 * j, p.N - 4) + i
                                        : min(col0 + 4 * j + i, p.N - 1));

  [[unroll]] for (uint r = 0; r < TM; ++r)
    [[unroll]] for (uint j = 0; j < TN4; ++j) acc[r][j] = vec4(0.0);

  const uint k_steps = p.K - p.K % BK;
  for (uint k = 0; k < k_steps; k += BK) {
    // a[s]: k .. k+3 of row lane + s*SG; b[kk][j]: row k+kk of B at vec4 column j.
    vec4 a[SLOTS];
    vec4 b[BK][TN4];
    [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
      const uint at = a_first[s] + k;
      if (A_VEC4) {
        a[s] = texelFetch(A, int(at / 4));
      } else {
        a[s] = vec4(texelFetch(A, int(at)).x, texelFetch(A, int(at + 1)).x,
                    texelFetch(A, int(at + 2)).x, texelFetch(A, int(at + 3)).x);
      }
    }
    [[unroll]] for (uint kk = 0; kk < BK; ++kk) {
      const uint row = (k + kk) * p.N;
      [[unroll]] for (uint j = 0; j < TN4; ++j) {
        if (B_VEC4) {
          b[kk][j] = texelFetch(B, int((b_first[j][0] + row) / 4));
        } else {
          b[kk][j] = vec4(texelFetch(B, int(b_first[j][0] + row)).x,
                          texelFetch(B, int(b_first[j][1] + row)).x,
                          texelFetch(B, int(b_first[j][2] + row)).x,
                          texelFetch(B, int(b_first[j][3] + row)).x);
        }
      }
    }
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      const vec4 ar = subgroupShuffle(a[r / SG], r % SG);
      [[unroll]] for (uint kk = 0; kk < BK; ++kk)
        [[unroll]] for (uint j = 0; j < TN4; ++j) acc[r][j] += ar[kk] * b[kk][j];
    }
  }

  // The last K % 4 k, one at a time (R32F A only: with A_VEC4, K % 4 == 0).
  for (uint k = k_steps; k < p.K; ++k) {
    float a[SLOTS];
    vec4 b[TN4];
    [[unroll]] for (uint s = 0; s < SLOTS; ++s) {
      const uint at = a_first[s] + k;
      a[s] = A_VEC4 ? texelFetch(A, int(at / 4))[at % 4] : texelFetch(A, int(at)).x;
    }
    const uint row = k * p.N;
    [[unroll]] for (uint j = 0; j < TN4; ++j) {
      if (B_VEC4) {
        b[j] = texelFetch(B, int((b_first[j][0] + row) / 4));
      } else {
        b[j] = vec4(texelFetch(B, int(b_first[j][0] + row)).x,
                    texelFetch(B, int(b_first[j][1] + row)).x,
                    texelFetch(B, int(b_first[j][2] + row)).x,
                    texelFetch(B, int(b_first[j][3] + row)).x);
      }
    }
    [[unroll]] for (uint r = 0; r < TM; ++r) {
      const float ar = subgroupShuffle(a[r / SG], r % SG);
      [[unroll]] for (uint j = 0; j < TN4; ++j) acc[r][j] += ar * b[j];
    }
  }

  [[unroll]] for (uint r = 0; r < TM; ++r) {
    const uint row = row0 + r;
    if (row >= p.M) break;  // rows past M were computed from clamped copies of row M-1
    [[unroll]] for (uint j = 0; j < TN4; ++j) {
      const uint col = col0 + 4 * j;
      const uint at = p.c_off + row * p.N + col;
      [[unroll]] for (uint i = 0; i < 4; ++i)
        if (col + i < p.N) c[at + i] = acc[r][j][i];  // columns past N were clamped copies
    }
  }
}
