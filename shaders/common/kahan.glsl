// Kahan-compensated float sums (Kahan4: four columns at once, for RGBA32F fetches). A lane
// of a small workgroup may sum 1e4+ values of a long row; plain fp32 accumulation then drifts
// ~sqrt(n) ulp (3e-6 relative at n = 2,500), compensated it stays within a few ulp for ~4
// extra flops per value. `precise` keeps the compiler from folding (t - s) - y to 0.
#ifndef VKGRAD_COMMON_KAHAN_GLSL
#define VKGRAD_COMMON_KAHAN_GLSL

struct Kahan {
  float s;  // running sum
  float c;  // minus the low-order part lost so far
};

const Kahan kKahanZero = Kahan(0.0, 0.0);

Kahan kahanAdd(Kahan a, float x) {
  precise const float y = x - a.c;
  precise const float t = a.s + y;
  precise const float c = (t - a.s) - y;
  return Kahan(t, c);
}

float kahanValue(Kahan a) { return a.s - a.c; }

// kahanAdd for sums that may hold infinities (the general ops' map_reduce: -inf from an
// attention mask through where(), a single-term "sum" of an elementwise op): once the sum is
// infinite the compensation would be inf - inf = NaN and turn it into NaN, so it is dropped.
// Finite sums give kahanAdd's bits; the hot row kernels keep kahanAdd (one select less).
Kahan kahanAddInf(Kahan a, float x) {
  precise const float y = x - a.c;
  precise const float t = a.s + y;
  precise const float c = (t - a.s) - y;
  return Kahan(t, isinf(t) ? 0.0 : c);
}

// The same for 4 columns at once, for kernels that fetch RGBA32F texels.
struct Kahan4 {
  vec4 s;  // running sums
  vec4 c;  // minus the low-order parts lost so far
};

const Kahan4 kKahan4Zero = Kahan4(vec4(0.0), vec4(0.0));

Kahan4 kahan4Add(Kahan4 a, vec4 v) {
  precise const vec4 y = v - a.c;
  precise const vec4 t = a.s + y;
  precise const vec4 c = (t - a.s) - y;
  return Kahan4(t, c);
}

vec4 kahan4Value(Kahan4 a) { return a.s - a.c; }

#endif
