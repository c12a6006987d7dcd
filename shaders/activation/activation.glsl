// The activation functions and their derivatives, selected by the KIND specialization
// constant (the order of ops::Activation), for activation/forward*.comp and backward*.comp.
#ifndef ACTIVATION_GLSL
#define ACTIVATION_GLSL

#include "common/ew_math.glsl"

// The KIND constant's id: 1, unless the including shader uses that one (matmul/texel.comp).
// The host names it KIND whatever its id (vk/spec_constants.h).
#ifndef ACTIVATION_KIND_ID
#define ACTIVATION_KIND_ID 1
#endif
layout(constant_id = ACTIVATION_KIND_ID) const uint KIND = 0;
const uint kRelu = 0, kLeakyRelu = 1, kGeluTanh = 2, kGeluErf = 3, kSigmoid = 4, kTanh = 5,
           kElu = 6, kExp = 7, kLog = 8, kNeg = 9, kReciprocal = 10, kSqrt = 11, kRsqrt = 12,
           kPow = 13, kErf = 14, kSilu = 15, kAbs = 16;

// Which of x and y the derivative reads; the other binding is a placeholder (the host binds
// dy there), so it is never loaded. Mirrors activationBackwardReads() in ops/activation.cpp.
const bool kGradReadsX = KIND == kLeakyRelu || KIND == kGeluTanh || KIND == kGeluErf ||
                         KIND == kElu || KIND == kLog || KIND == kPow || KIND == kErf ||
                         KIND == kSilu || KIND == kAbs;
const bool kGradReadsY = !kGradReadsX;

const float kGeluK = 0.7978845608;  // sqrt(2 / pi)
const float kGeluC = 0.044715;

// x^p for a constant p: exact products for the small integer powers models use (x^2, x^3 of
// GELU's tanh form), the sign of an odd integer power kept for negative x, NaN for a negative
// x under a fractional power (as C's pow), else exp(p log|x|).
float ewPowConst(float x, float p) {
  if (p == 0.0) return 1.0;
  if (p == 1.0) return x;
  if (p == 2.0) return x * x;
  if (p == 3.0) return x * x * x;
  if (p == -1.0) return 1.0 / x;
  if (p == 0.5) return sqrt(x);
  const bool integral = p == round(p), odd = integral && mod(p, 2.0) != 0.0;
  if (x < 0.0 && !integral) return uintBitsToFloat(0x7fc00000u);  // NaN
  if (x == 0.0) return p > 0.0 ? 0.0 : (odd ? sign(x) : 1.0) * uintBitsToFloat(0x7f800000u);
  const float r = ewExp(p * log(abs(x)));
  return x < 0.0 && odd ? -r : r;
}

// erf(x): the odd Taylor series to x^13 where |x| < 0.5 (truncation < 2e-8 relative, and no
// 1 - erfc cancellation near 0), 1 - erfc(|x|) from the erfc fit elsewhere.
float ewErf(float x) {
  const float ax = abs(x);
  if (ax < 0.5) {
    const float x2 = x * x;
    return 1.1283791671 * x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 +
           x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0)))))));
  }
  const float h = ewHead12(ax);
  return sign(x) * (1.0 - ewErfcFit(ax, h * h, (ax - h) * (ax + h)));
}

// param: LeakyRelu's negative slope, Elu's alpha, Pow's exponent.
float activate(float x, float param) {
  if (KIND == kRelu) return x > 0.0 ? x : 0.0;
  if (KIND == kLeakyRelu) return x > 0.0 ? x : param * x;
  // (1 + tanh(u)) / 2 == sigmoid(2u): no cancellation for very negative x, and u = +-inf
  // (x^3 overflows past |x| ~ 7e12) still gives x or 0.
  if (KIND == kGeluTanh) return x * ewSigmoid(2.0 * kGeluK * (x + kGeluC * x * x * x));
  if (KIND == kGeluErf) return x * ewNormalCdf(x);
  if (KIND == kSigmoid) return ewSigmoid(x);
  if (KIND == kTanh) return ewTanh(x);
  if (KIND == kElu) return x > 0.0 ? x : param * ewExpm1(x);
  if (KIND == kExp) return ewExp(x);
  if (KIND == kNeg) return -x;
  if (KIND == kReciprocal) return 1.0 / x;
  if (KIND == kSqrt) return sqrt(x);
  if (KIND == kRsqrt) return 1.0 / sqrt(x);  // inversesqrt is only specified to 2 ULP
  if (KIND == kPow) return ewPowConst(x, param);
  if (KIND == kErf) return ewErf(x);
  if (KIND == kSilu) return x * ewSigmoid(x);
  if (KIND == kAbs) return abs(x);
  return log(x);  // kLog; GLSL: 3 ULP, or 2^-21 absolute on [0.5, 2]
}

// d activate / dx times dy.
float activationGrad(float x, float y, float dy, float param) {
  if (KIND == kRelu) return y > 0.0 ? dy : 0.0;
  if (KIND == kLeakyRelu) return x > 0.0 ? dy : param * dy;
  if (KIND == kGeluTanh) {
    // d/dx x s(2u) = s + x * 2 s (1 - s) * du/dx. Once |x| > 1e4, s (1 - s) is exactly 0,
    // so clamping there changes nothing but keeps x^2 from overflowing into 0 * inf.
    const float xc = clamp(x, -1e4, 1e4);
    const float u2 = 2.0 * kGeluK * (xc + kGeluC * xc * xc * xc);
    const float s = ewSigmoid(u2), s_neg = ewSigmoid(-u2);
    return dy * (s + xc * 2.0 * s * s_neg * kGeluK * (1.0 + 3.0 * kGeluC * xc * xc));
  }
  if (KIND == kGeluErf) return dy * (ewNormalCdf(x) + x * 0.3989422804 * ewGaussian(x));
  if (KIND == kSigmoid) return dy * y * (1.0 - y);
  if (KIND == kTanh) return dy * ((1.0 - y) * (1.0 + y));  // 1 - y is exact near |y| = 1
  if (KIND == kElu) return x > 0.0 ? dy : dy * param * ewExp(x);
  if (KIND == kExp) return dy * y;
  if (KIND == kNeg) return -dy;
  if (KIND == kReciprocal) return -dy * y * y;
  if (KIND == kSqrt) return dy * 0.5 / y;
  if (KIND == kRsqrt) return -0.5 * dy * y * y * y;
  if (KIND == kPow) return dy * param * ewPowConst(x, param - 1.0);
  if (KIND == kErf) {
    // 2/sqrt(pi) exp(-x^2), the square split as in ewGaussian.
    const float ax = abs(x), h = ewHead12(ax);
    return dy * 1.1283791671 * ewExp(-(h * h)) * ewExp(-((ax - h) * (ax + h)));
  }
  if (KIND == kSilu) {
    const float s = ewSigmoid(x), s_neg = ewSigmoid(-x);  // s_neg = 1 - s without cancellation
    return dy * s * (1.0 + x * s_neg);
  }
  if (KIND == kAbs) return x > 0.0 ? dy : (x < 0.0 ? -dy : 0.0);
  return dy / x;  // kLog
}

#endif  // ACTIVATION_GLSL
