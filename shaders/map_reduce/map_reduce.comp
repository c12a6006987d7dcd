#version 450
#extension GL_GOOGLE_include_directive : require
// out[o] (= or +=) alpha * R over the reduced axes of FN(x, y, z), everything broadcast over a
// "space" of up to 6 axes: the kernel behind the general binary ops (numpy broadcasting on
// both sides), where, the reductions over any set of axes, and their gradients (a broadcast
// operand's gradient is a sum of the same products over the axes it was broadcast along).
// One invocation per output element, in output order, folding its reduced elements in a
// fixed order (sums Kahan-compensated): the same inputs give the same bits, no atomics. A long
// fold is split into `parts` consecutive chunks, one invocation each, writing partial results
// (n_out, parts) that a second dispatch of this kernel folds (ops/map_reduce.cpp): no
// invocation loops more than a chunk's length, which a GPU needs for parallelism and
// llvmpipe for its loop budget (an invocation ends after 65,535 iterations).
// General index arithmetic, storage-buffer loads: the model kernels (ops/elementwise.h,
// ops/reduce.h) stay the fast path where their one-sided shapes fit.
#include "common/kahan.glsl"
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;

// The element function (ops::MapFn's order). x of Where, MaskTrue and MaskFalse is a u32
// condition (nonzero: true), read as words through x_bits.
layout(constant_id = 1) const uint FN = 0;
const uint kX = 0, kAdd = 1, kSub = 2, kMul = 3, kDiv = 4, kMax = 5, kMin = 6, kWhere = 7,
           kMaskTrue = 8, kMaskFalse = 9, kDivGradB = 10, kSelectEqual = 11;
// The fold over reduced axes (ops::Fold's order): a sum, or a maximum.
layout(constant_id = 2) const uint FOLD = 0;
const uint kSum = 0, kMaxFold = 1;
layout(constant_id = 3) const bool ACCUMULATE = false;
// Whether this dispatch folds in parts (p.parts > 1): the other dispatches, elementwise ops
// among them, skip the parts' index arithmetic (an integer division per item is dear on a CPU).
layout(constant_id = 4) const bool SPLIT = false;

FLOATS(0, x, readonly)
FLOATS(1, y, readonly)
FLOATS(2, z, readonly)
FLOATS(3, result, )
layout(set = 0, binding = 0) readonly buffer XBits { uint x_bits[]; };

layout(push_constant) uniform Push {
  uint dims[6];        // the space, padded with leading 1s to 6 axes
  uint strides[3][6];  // per input (x, y, z), its stride along each space axis (0: broadcast)
  uint skip[4];        // first elements of x, y, z and out inside their bindings
  uint parts;          // partial folds per output, written as (n_out, parts); 1: the whole fold
  uint chunk;          // reduced elements each part folds (the last part: what is left)
  uint reduced;        // bit a: space axis a is reduced; bits 8 and up: how many of the last
                       // axes to walk (the host merges axes that walk alike: ops/map_reduce.cpp)
  float alpha;
} p;

bool isReduced(int a) { return ((p.reduced >> uint(a)) & 1u) != 0u; }
int firstAxis() { return 6 - int(p.reduced >> 8u); }  // the axes before it have size 1

float element(uint ix, uint iy, uint iz) {
  if (FN == kWhere || FN == kMaskTrue || FN == kMaskFalse) {
    const bool c = x_bits[ix] != 0u;
    if (FN == kWhere) return c ? LOAD(y, iy) : LOAD(z, iz);
    if (FN == kMaskTrue) return c ? LOAD(y, iy) : 0.0;
    return c ? 0.0 : LOAD(y, iy);
  }
  const float a = LOAD(x, ix);
  if (FN == kX) return a;
  const float b = LOAD(y, iy);
  if (FN == kAdd) return a + b;
  if (FN == kSub) return a - b;
  if (FN == kMul) return a * b;
  if (FN == kDiv) return a / b;
  if (FN == kMax) return max(a, b);
  if (FN == kMin) return min(a, b);
  const float c = LOAD(z, iz);
  if (FN == kDivGradB) return -a * b / (c * c);  // d(y/z)/dz times x, as (dout, a, b)
  return a == b ? c : 0.0;                       // kSelectEqual: a max's gradient
}

void main() {
  const int first = firstAxis();
  // Outputs (the kept axes' product) and the elements folded into each (the reduced axes').
  uint n_out = 1u, n_fold = 1u;
  for (int a = first; a < 6; ++a) {
    if (isReduced(a)) n_fold *= p.dims[a];
    else n_out *= p.dims[a];
  }
  const uint items = n_out * p.parts;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint t = gl_GlobalInvocationID.x; t < items; t += stride) {
    const uint o = SPLIT ? t / p.parts : t;
    // The kept axes' coordinates from o (row-major over the kept axes), as input offsets.
    uint rest = o, ix = p.skip[0], iy = p.skip[1], iz = p.skip[2];
    for (int a = 5; a >= first; --a) {
      if (isReduced(a)) continue;
      const uint i = rest % p.dims[a];
      rest /= p.dims[a];
      ix += i * p.strides[0][a];
      iy += i * p.strides[1][a];
      iz += i * p.strides[2][a];
    }
    // This part's first reduced element, as coordinates on the reduced axes (last fastest).
    const uint begin = SPLIT ? (t % p.parts) * p.chunk : 0u;
    const uint end = SPLIT ? min(begin + p.chunk, n_fold) : n_fold;
    uint idx[6] = uint[6](0u, 0u, 0u, 0u, 0u, 0u);
    if (SPLIT) {
      rest = begin;
      for (int a = 5; a >= first; --a) {
        if (!isReduced(a)) continue;
        idx[a] = rest % p.dims[a];
        rest /= p.dims[a];
        ix += idx[a] * p.strides[0][a];
        iy += idx[a] * p.strides[1][a];
        iz += idx[a] * p.strides[2][a];
      }
    }
    // The reduced axes walked as an odometer, last axis fastest: one add per step.
    Kahan sum = kKahanZero;
    float best = uintBitsToFloat(0xff800000u);  // -inf
    for (uint r = begin; r < end; ++r) {
      const float v = element(ix, iy, iz);
      if (FOLD == kSum) sum = kahanAddInf(sum, v);
      else best = isnan(v) || isnan(best) ? v + best : max(best, v);  // NaN wins, as numpy
      for (int a = 5; a >= first; --a) {
        if (!isReduced(a)) continue;
        ix += p.strides[0][a];
        iy += p.strides[1][a];
        iz += p.strides[2][a];
        if (++idx[a] < p.dims[a]) break;
        // Axis a wrapped: back to its start, carry into the next reduced axis.
        ix -= p.dims[a] * p.strides[0][a];
        iy -= p.dims[a] * p.strides[1][a];
        iz -= p.dims[a] * p.strides[2][a];
        idx[a] = 0u;
      }
    }
    float v = p.alpha * (FOLD == kSum ? kahanValue(sum) : best);
    if (ACCUMULATE) v += LOAD(result, p.skip[3] + t);
    STORE(result, p.skip[3] + t, v);
  }
}
