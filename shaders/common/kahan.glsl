// Kahan-compensated float sums. A lane of a small workgroup may sum 1e4+ values of a long
// row; plain fp32 accumulation then drifts ~sqrt(n) ulp (3e-6 relative at n = 2,500),
// compensated it stays within a few ulp for ~4 extra flops per value. `precise` keeps the
// compiler from folding (t - s) - y to 0.
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

#endif
