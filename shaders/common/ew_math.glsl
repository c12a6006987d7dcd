// Float-accurate exp, expm1, tanh, sigmoid and the normal CDF for the elementwise and
// activation kernels. GLSL's exp is only specified to (3 + 2|x|) ULP, its tanh may overflow
// to NaN for large |x|, and there is no erf at all. Measured against double on the CPU with
// IEEE float arithmetic (max relative error over the range where the result is a normal
// float): ew_exp 1.0e-7, ew_expm1 2.7e-7, ew_tanh 1.9e-7, ew_normalCdf 4.4e-7 (down to
// x = -13, where the CDF is 1e-38).
#ifndef EW_MATH_GLSL
#define EW_MATH_GLSL

// 2^k for k in [-126, 127], built from its bits (exact; no exp2 rounding or overflow).
float ewPow2(int k) { return uintBitsToFloat(uint(k + 127) << 23); }

// exp(x): Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then the degree-7 Taylor
// polynomial of exp(r) (truncation error r^8/8! < 6e-9). ln2 is split into a 15-bit head,
// so k * kLn2Hi is exact for every k that reaches the polynomial.
float ewExp(float x) {
  if (isnan(x)) return x;
  if (x > 88.72283) return uintBitsToFloat(0x7f800000u);  // exp(x) > FLT_MAX: +inf
  if (x < -87.33654) return 0.0;    // below the smallest normal float; denormals are flushed
  const float kLn2Hi = 0.693145751953125, kLn2Lo = 1.428606820309417e-6;
  const float k = round(x * 1.4426950409);
  const float r = (x - k * kLn2Hi) - k * kLn2Lo;
  const float p =
      1.0 + r * (1.0 + r * (1.0 / 2.0 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 +
      r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
  // k reaches 128 (and 2^128 is not a float), so scale in two halves.
  const int ki = int(k), k1 = ki / 2;
  return p * ewPow2(k1) * ewPow2(ki - k1);
}

// exp(x) - 1 without the cancellation near 0: the degree-8 Taylor polynomial where
// |x| < ln2/2 (truncation error x^9/9! < 3e-10), exp(x) - 1 outside, where it is exact enough.
float ewExpm1(float x) {
  if (abs(x) < 0.3465736) {
    return x * (1.0 + x * (1.0 / 2.0 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0 +
           x * (1.0 / 720.0 + x * (1.0 / 5040.0 + x * (1.0 / 40320.0))))))));
  }
  return ewExp(x) - 1.0;
}

// tanh(x) = -expm1(-2|x|) / (2 + expm1(-2|x|)), signed: the exponent is never positive, so
// nothing overflows for large |x| (the result goes to +-1), and expm1 keeps small |x| exact.
float ewTanh(float x) {
  const float e = ewExpm1(-2.0 * abs(x));
  return sign(x) * (-e / (2.0 + e));
}

// 1 / (1 + exp(-x)), with the exponent never positive: no overflow, no 1 - 1 cancellation.
float ewSigmoid(float x) {
  const float e = ewExp(-abs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

// x with the low 12 mantissa bits cleared: its square is exact in float.
float ewHead12(float x) { return uintBitsToFloat(floatBitsToUint(x) & 0xfffff000u); }

// exp(-x^2 / 2) with x^2 formed exactly as head^2 + (x - head)(x + head): at |x| = 13 a rounded
// x * x alone would cost 5e-6 of relative accuracy in the result.
float ewGaussian(float x) {
  const float ax = abs(x), h = ewHead12(ax);
  return ewExp(-0.5 * (h * h)) * ewExp(-0.5 * ((ax - h) * (ax + h)));
}

// erfc(z) for z >= 0, given z^2 = sq_hi + sq_lo with sq_hi exact: the Chebyshev fit of
// Numerical Recipes (2nd ed., section 6.2, erfcc), fractional error < 1.2e-7 for all z >= 0.
float ewErfcFit(float z, float sq_hi, float sq_lo) {
  const float t = 1.0 / (1.0 + 0.5 * z);
  const float poly =
      -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 +
      t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 +
      t * 0.17087277))))))));
  return t * ewExp(-sq_hi) * ewExp(poly - sq_lo);
}

// Phi(x) = (1 + erf(x / sqrt(2))) / 2, the standard normal CDF. The tail is computed as
// erfc(|x| / sqrt(2)) / 2 directly, so Phi(x) keeps its relative accuracy for very negative x
// (no 1 + erf cancellation), and z^2 = x^2 / 2 is taken from x, not from the rounded x / sqrt(2).
float ewNormalCdf(float x) {
  const float ax = abs(x), h = ewHead12(ax);
  const float tail = 0.5 * ewErfcFit(ax * 0.70710678, 0.5 * (h * h), 0.5 * ((ax - h) * (ax + h)));
  return x >= 0.0 ? 1.0 - tail : tail;
}

#endif  // EW_MATH_GLSL
