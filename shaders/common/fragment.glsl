// Fragments: 16x16 matrices spread over a warp, the unit tensor-core kernels compute in.
// FragH holds fp16 values (an operand), FragF fp32 ones (an accumulator). One source, two
// builds (cmake/Shaders.cmake compiles a kernel that includes this file twice):
//  - native: GL_NV_cooperative_matrix (Debian 12's glslang compiles NV, not KHR); a warp is a
//    subgroup, and the device must have a fixed subgroup size (ops/matmul.cpp checks);
//  - "<name>.emu", FRAG_EMULATED defined: plain GLSL that runs anywhere with fp16 arithmetic
//    (lavapipe in CI). A warp is 32 consecutive invocations of the workgroup (a virtual warp
//    over lavapipe's subgroups of 8 or 16), each holding 8 elements of a fragment in a
//    scrambled order unlike NVIDIA's, so code that guesses the layout fails its tests.
//    Operands are fp16 and sums fp32 as on the hardware (fp16 x fp16 products are exact in
//    fp32; only the order of the sums differs).
//
// The kernel defines FRAG_WARPS (warps per workgroup, a constant expression) and then
// includes this file after the constants it names. Its contract, which both builds keep:
//   FragH, FragF                     the types (locals and arrays of them are fine)
//   fragWarp(), fragLane()           this invocation's warp in the workgroup, lane in the warp
//   fragWarpBarrier()                the warp's shared-memory writes are visible to the warp
//   fragFillH(x), fragFillF(x)       every element x
//   fragScaleH(m, s), fragScaleF     every element times s
//   fragMulAdd(a, b, c)              a·b + c: (16x16 fp16)·(16x16 fp16) + 16x16 fp32
//   fragToH(f)                       an accumulator rounded to fp16, as an operand
//   FRAG_LOAD_H(m, arr, off, ld, cm) m from a shared uvec2 array, four halves per element:
//                                    element (r, c) is half 4·off + 4·ld·r + c (row-major) or
//                                    4·off + 4·ld·c + r (cm: column-major); off and ld count
//                                    uvec2s, so each row starts on 8 bytes as the hardware
//                                    needs (16 where it reads 16 at a time)
//   FRAG_LOAD_F(m, arr, off, ld, cm), FRAG_STORE_F   m from or to a shared float array
//   FRAG_LENGTH(m), FRAG_EL(m, i)    this invocation's elements of m, in no given order
//   FRAG_UNROLL                      a loop over fragment calls: unrolled natively, not emulated
//   fragIndexF()                     the coordinate hook: an accumulator whose element i is
//                                    16·row + col of element i, so row-wise work (a row's
//                                    max, exp, scaling) knows where each element is; needs
//                                    FRAG_INDEX defined before the include (the native build
//                                    then spends 512 bytes of shared memory per warp on it)
// Every call must be reached by the whole workgroup together (the emulated multiply-add and
// conversion are workgroup barriers; the native build needs only the subgroup), and data one
// lane stored is read by another only after fragWarpBarrier().
#ifndef COMMON_FRAGMENT_GLSL
#define COMMON_FRAGMENT_GLSL

#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : require

#ifndef FRAG_EMULATED

#extension GL_NV_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_basic : require

#define FragH fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define FragF fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>

// gl_SubgroupID, not an index divided by the subgroup size, which Vulkan does not promise.
uint fragWarp() {
  return gl_SubgroupID;
}
uint fragLane() {
  return gl_SubgroupInvocationID;
}
void fragWarpBarrier() {
  subgroupMemoryBarrierShared();
  subgroupBarrier();
}

FragH fragFillH(float16_t x) {
  return FragH(x);
}
FragF fragFillF(float x) {
  return FragF(x);
}
FragH fragScaleH(FragH m, float16_t s) {
  return m * s;
}
FragF fragScaleF(FragF m, float s) {
  return m * s;
}
FragF fragMulAdd(FragH a, FragH b, FragF c) {
  return coopMatMulAddNV(a, b, c);
}
FragH fragToH(FragF f) {
  return FragH(f);
}

#define FRAG_LOAD_H(m, arr, off, ld, cm) coopMatLoadNV(m, arr, off, ld, cm)
#define FRAG_LOAD_F(m, arr, off, ld, cm) coopMatLoadNV(m, arr, off, ld, cm)
#define FRAG_STORE_F(m, arr, off, ld, cm) coopMatStoreNV(m, arr, off, ld, cm)
#define FRAG_UNROLL [[unroll]]
#define FRAG_LENGTH(m) (m).length()
#define FRAG_EL(m, i) (m)[i]

#ifdef FRAG_INDEX
// The hardware's layout is not ours to know: each warp writes every element's coordinate to
// its slice, and a fragment loaded from there carries them.
shared float16_t frag_index[FRAG_WARPS * 256];
FragF fragIndexF() {
  const uint base = fragWarp() * 256;
  for (uint e = fragLane(); e < 256; e += gl_SubgroupSize) frag_index[base + e] = float16_t(e);
  // Every lane's coordinates are in the slice before the warp loads it.
  fragWarpBarrier();
  FragH h;
  coopMatLoadNV(h, frag_index, base, 16, false);
  return FragF(h);
}
#endif

#else  // FRAG_EMULATED

const uint kFragLanes = 32, kFragPer = 8;  // a virtual warp, and each lane's elements

struct FragH {
  float16_t v[kFragPer];
};
struct FragF {
  float v[kFragPer];
};

uint fragWarp() {
  return gl_LocalInvocationIndex / kFragLanes;
}
uint fragLane() {
  return gl_LocalInvocationIndex % kFragLanes;
}
// A virtual warp spans several subgroups, so only the workgroup's barrier orders it.
void fragWarpBarrier() {
  barrier();
}

// The position (16·row + col) of element i of lane l: an odd multiplier and an xor make a
// bijection of 0..255 that puts a lane's elements in different rows and columns, and a
// different one for each type, so FragH and FragF do not share a layout either.
uint fragPosH(uint l, uint i) {
  return ((l * kFragPer + i) * 157u ^ 0x5au) & 255u;
}
uint fragPosF(uint l, uint i) {
  return ((l * kFragPer + i) * 91u ^ 0xa7u) & 255u;
}
// Half q (0..3) of a uvec2 of four packed halves.
float16_t fragHalfOf(uvec2 w, uint q) {
  return float16_t(unpackHalf2x16(w[q >> 1] >> (16 * (q & 1))).x);
}
// Where element (r, c) of a matrix with leading dimension ld is, from its start.
uint fragAt(uint e, uint ld, bool cm) {
  return cm ? (e & 15) * ld + (e >> 4) : (e >> 4) * ld + (e & 15);
}

FragH fragFillH(float16_t x) {
  FragH m;
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) m.v[i] = x;
  return m;
}
FragF fragFillF(float x) {
  FragF m;
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) m.v[i] = x;
  return m;
}
FragH fragScaleH(FragH m, float16_t s) {
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) m.v[i] *= s;
  return m;
}
FragF fragScaleF(FragF m, float s) {
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) m.v[i] *= s;
  return m;
}

// Each warp's slice: a multiply-add's two operands (256 halves each), or a conversion's matrix.
shared float16_t frag_scratch[FRAG_WARPS * 512];

FragF fragMulAdd(FragH a, FragH b, FragF c) {
  const uint base = fragWarp() * 512, lane = fragLane();
  // The slice's last readers (the previous multiply-add or conversion) are done.
  barrier();
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) {
    frag_scratch[base + fragPosH(lane, i)] = a.v[i];
    frag_scratch[base + 256 + fragPosH(lane, i)] = b.v[i];
  }
  // Both operands are whole in the slice before any lane reads a row or column of them.
  barrier();
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) {
    const uint e = fragPosF(lane, i), r = e >> 4, col = e & 15;
    float sum = c.v[i];
    [[dont_unroll]] for (uint k = 0; k < 16; ++k)
      sum += float(frag_scratch[base + r * 16 + k]) *
             float(frag_scratch[base + 256 + k * 16 + col]);
    c.v[i] = sum;
  }
  return c;
}

FragH fragToH(FragF f) {
  const uint base = fragWarp() * 512, lane = fragLane();
  // As in fragMulAdd: the slice is free, then whole before it is read in the other order.
  barrier();
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i)
    frag_scratch[base + fragPosF(lane, i)] = float16_t(f.v[i]);
  barrier();
  FragH h;
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i)
    h.v[i] = frag_scratch[base + fragPosH(lane, i)];
  return h;
}

#ifdef FRAG_INDEX
FragF fragIndexF() {
  FragF m;
  [[dont_unroll]] for (uint i = 0; i < kFragPer; ++i) m.v[i] = float(fragPosF(fragLane(), i));
  return m;
}
#endif

// The frag_-prefixed locals keep the macros apart from the caller's names.
#define FRAG_LOAD_H(m, arr, off, ld, cm)                                                \
  [[dont_unroll]] for (uint frag_i = 0; frag_i < kFragPer; ++frag_i) {                  \
    const uint frag_h = 4 * (off) + fragAt(fragPosH(fragLane(), frag_i), 4 * (ld), cm); \
    m.v[frag_i] = fragHalfOf(arr[frag_h >> 2], frag_h & 3);                             \
  }
#define FRAG_LOAD_F(m, arr, off, ld, cm)                               \
  [[dont_unroll]] for (uint frag_i = 0; frag_i < kFragPer; ++frag_i)   \
    m.v[frag_i] = arr[(off) + fragAt(fragPosF(fragLane(), frag_i), ld, cm)];
#define FRAG_STORE_F(m, arr, off, ld, cm)                              \
  [[dont_unroll]] for (uint frag_i = 0; frag_i < kFragPer; ++frag_i)   \
    arr[(off) + fragAt(fragPosF(fragLane(), frag_i), ld, cm)] = m.v[frag_i];
// llvmpipe's compile time grows steeply with the code unrolled around barriers and
// shared-memory gathers: the Coopmat kernel with its fragment loops unrolled compiled for
// minutes. Every loop of the emulated build stays rolled (its speed does not matter; the
// compile time of the tests does).
#define FRAG_UNROLL [[dont_unroll]]
#define FRAG_LENGTH(m) int(kFragPer)
#define FRAG_EL(m, i) (m).v[i]

#endif  // FRAG_EMULATED
#endif  // COMMON_FRAGMENT_GLSL
