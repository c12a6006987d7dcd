// exp(d) for softmax's d = x - max <= 0, four values at a time, cheaper than GLSL's exp on
// lavapipe (llvmpipe's exp clamps the argument NaN-aware before the same kind of polynomial):
// the softmax forward at 10240 x 1024 ran ~10 % faster with it (BENCHMARKS.md, softmax).
//
// 2^t with t = d log2(e) = k + f, k = round(t), |f| <= 1/2: 2^f by a degree-5 polynomial
// fitted for relative error (minimax, 1 + f q(f) so that exp(0) is exactly 1; its own error
// 9e-8), times 2^k built from its exponent bits. Adding 1.5 * 2^23 + 127 to t rounds it to an
// integer in the addition and leaves 127 + k in the low mantissa bits, which a shift by 23
// moves into the exponent field (the other bits shift out), so k costs an add and a subtract.
// Both are `precise`: a compiler that folded (t + c) - c to t would break the rounding.
//
// Error (IEEE f32 emulated against double, 4e5 samples): at most 2.5 ulp for d in [-1, 0];
// further out the rounding of d log2(e) dominates, up to 63 ulp at d = -82 (0.59 of the
// 3 + 2|d| ulp GLSL allows its exp). Those outputs are below e^-80 of the row's largest.
// Below t = -126 (d < -87.3, under the smallest normal float) the result is 0; d = -inf gives
// 0 (a masked entry), NaN gives NaN (p is NaN, and NaN times any scale stays NaN).
#ifndef VKGRAD_SOFTMAX_EXP_GLSL
#define VKGRAD_SOFTMAX_EXP_GLSL

vec4 softmaxExp(vec4 d) {
  const float kRoundAndBias = 12583039.0;  // 1.5 * 2^23 + 127
  const vec4 t = d * 1.4426950408889634;
  precise const vec4 u = t + kRoundAndBias;  // 2^23 + 2^22 + 127 + k exactly, for t >= -126
  precise const vec4 k = u - kRoundAndBias;
  const vec4 f = t - k;  // exact: k is t rounded
  vec4 q = vec4(0.0013264719796783786);
  q = q * f + 0.009671513151641288;
  q = q * f + 0.05550733767871721;
  q = q * f + 0.2402224207421286;
  q = q * f + 0.6931469775819995;
  const vec4 p = q * f + 1.0;
  const vec4 scale = intBitsToFloat(floatBitsToInt(u) << 23);  // 2^k, k >= -126
  // t < -126: 2^k is not a normal float there (and for -inf, f and p are NaN): 0.
  return mix(p * scale, vec4(0.0), lessThan(t, vec4(-126.0)));
}

#endif
