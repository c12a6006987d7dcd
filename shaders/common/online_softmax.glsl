// Online softmax statistics: a running maximum m and the sum s of exp(x - m) over the
// values seen so far, so one pass over a row gives both (Milakov & Gimelshein 2018).
// Pairs combine in any order, which lets lanes, subgroups and tiles (flash attention)
// each keep their own and merge them at the end. No shared memory here; for the
// workgroup-wide combine see common/reduce.glsl.
//
// Empty or all -inf input is m = -inf, s = 0. Every exp below is guarded for that case
// because exp(-inf - (-inf)) is NaN, and a fully masked row must give zeros, not NaN.
// Needs GL_KHR_shader_subgroup_arithmetic enabled by the includer for subgroupMaxSum.
#ifndef VKGRAD_COMMON_ONLINE_SOFTMAX_GLSL
#define VKGRAD_COMMON_ONLINE_SOFTMAX_GLSL

#include "common/kahan.glsl"

const float kNegInf = -1.0 / 0.0;

struct MaxSum {
  float m;  // largest value seen, -inf if none
  float s;  // sum of exp(x - m) over the values seen
};

const MaxSum kMaxSumEmpty = MaxSum(kNegInf, 0.0);

// Adds one value with a single exp: whichever of (old max, x) is smaller is rescaled to
// the larger. Branch-free: lanes run in lockstep, so an if/else would run both sides.
MaxSum maxSumAdd(MaxSum a, float x) {
  const float m = max(a.m, x);
  const float e = m == kNegInf ? 0.0 : exp(min(a.m, x) - m);
  return MaxSum(m, x > a.m ? a.s * e + 1.0 : a.s + e);
}

// A lane's running pair, its sum Kahan-compensated (common/kahan.glsl): a lane of an
// 8-wide workgroup sums 12,500 values of a 100k row, where plain fp32 drifts ~7e-6.
struct MaxSumAcc {
  float m;    // largest value seen, -inf if none
  Kahan sum;  // of exp(x - m)
};

const MaxSumAcc kMaxSumAccEmpty = MaxSumAcc(kNegInf, kKahanZero);

MaxSumAcc maxSumAccAdd(MaxSumAcc a, float x) {
  const float m = max(a.m, x);
  const float e = m == kNegInf ? 0.0 : exp(min(a.m, x) - m);
  // A new max rescales the old sum (and its correction) and adds exp(0) = 1.
  const bool grew = x > a.m;
  const Kahan scaled = grew ? Kahan(a.sum.s * e, a.sum.c * e) : a.sum;
  return MaxSumAcc(m, kahanAdd(scaled, grew ? 1.0 : e));
}

MaxSum maxSumAccResult(MaxSumAcc a) { return MaxSum(a.m, kahanValue(a.sum)); }

MaxSum maxSumCombine(MaxSum a, MaxSum b) {
  const float m = max(a.m, b.m);
  if (m == kNegInf) return kMaxSumEmpty;
  return MaxSum(m, a.s * exp(a.m - m) + b.s * exp(b.m - m));
}

#ifndef NO_SUBGROUP_ARITHMETIC
// The combined pair of the whole subgroup, in every lane. Call from uniform control flow.
MaxSum subgroupMaxSum(MaxSum a) {
  const float m = subgroupMax(a.m);
  const float scaled = m == kNegInf ? 0.0 : a.s * exp(a.m - m);
  return MaxSum(m, subgroupAdd(scaled));
}
#endif

#endif
