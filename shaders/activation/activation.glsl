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
           kElu = 6, kExp = 7, kLog = 8;

// Which of x and y the derivative reads; the other binding is a placeholder (the host binds
// dy there), so it is never loaded. Mirrors activationBackwardReads() in ops/activation.cpp.
const bool kGradReadsX = KIND == kLeakyRelu || KIND == kGeluTanh || KIND == kGeluErf ||
                         KIND == kElu || KIND == kLog;
const bool kGradReadsY = !kGradReadsX;

const float kGeluK = 0.7978845608;  // sqrt(2 / pi)
const float kGeluC = 0.044715;

// param: LeakyRelu's negative slope, Elu's alpha.
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
  return dy / x;  // kLog
}

#endif  // ACTIVATION_GLSL
