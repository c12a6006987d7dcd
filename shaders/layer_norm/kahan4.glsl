// Kahan-compensated sums of 4 columns at once, for the kernels that fetch RGBA32F texels
// (common/kahan.glsl is the scalar one). `precise` keeps (t - sum) - y from folding to 0.
#ifndef VKGRAD_LAYERNORM_KAHAN4_GLSL
#define VKGRAD_LAYERNORM_KAHAN4_GLSL

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
