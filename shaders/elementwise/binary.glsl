// Body of elementwise/binary.comp and binary_texel.comp:
//   out (= or +=) op(a, b), where element i of a meets b[(i / div) % nb]
// (ops/elementwise.h says which shapes give which nb and div). The storage variant reads
// one element per step from storage buffers: any device, any offset, every tensor in any
// float format (common/storage.glsl; the arithmetic is f32). The texel variant reads
// four floats per step through RGBA32F texel buffers and stores them 16 bytes at a time: on
// lavapipe storage-buffer loads are scalarised per lane and about 5x slower than texel
// fetches.

layout(local_size_x_id = 0) in;
// Must match BinaryOp in ops/elementwise.cpp.
layout(constant_id = 1) const uint OP = 0;  // 0: alpha a + beta b, 1: alpha a b, 2: alpha a, 3: beta b
layout(constant_id = 2) const uint BCAST = 0;  // 0: b like a; 1: b[i % nb]; 2: b[(i / div) % nb]
layout(constant_id = 3) const bool ACCUMULATE = false;

layout(push_constant) uniform Push {
  uint n;             // elements of a and out
  uint nb;            // elements of b
  uint div;           // consecutive elements of a that share one b element
  float alpha, beta;  // coefficients of a and b
  // Element offsets of the operands inside their bindings (a binding starts at the device's
  // alignment at or below its view). Multiples of 4 for operands fetched as RGBA texels.
  uint a_skip, b_skip, out_skip;
} p;

#if EW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer a_tex;    // RGBA32F over (n)
layout(set = 0, binding = 1) uniform samplerBuffer b_tex;    // RGBA32F if BCAST == 0, else R32F
layout(set = 0, binding = 2) uniform samplerBuffer acc_tex;  // RGBA32F over out; read if ACCUMULATE
layout(set = 0, binding = 3) writeonly buffer Out { float out_[]; };
#else
FLOATS(0, a, readonly)
FLOATS(1, b, readonly)
FLOATS(2, result, )  // out; not writeonly: ACCUMULATE reads it
#endif
// a or b is a placeholder where OP does not read it. out may be a, or b when BCAST == 0:
// every step reads its inputs before it writes the same elements of out.

uint bIndex(uint i) { return BCAST == 0 ? i : (BCAST == 1 ? i % p.nb : (i / p.div) % p.nb); }

float combine(float x, float y) {
  return OP == 0 ? p.alpha * x + p.beta * y
                 : (OP == 1 ? p.alpha * x * y : (OP == 2 ? p.alpha * x : p.beta * y));
}
vec4 combine(vec4 x, vec4 y) {
  return OP == 0 ? p.alpha * x + p.beta * y
                 : (OP == 1 ? p.alpha * x * y : (OP == 2 ? p.alpha * x : p.beta * y));
}

#if EW_TEXEL
layout(set = 0, binding = 3) writeonly buffer Out4 { vec4 out4[]; };  // out, 16 bytes a step
#include "common/texel_store.glsl"

vec4 resultTexel(uint t) {
  const uint e = 4 * t;
  const vec4 av = OP != 3 ? texelFetch(a_tex, int(p.a_skip / 4 + t)) : vec4(0.0);
  vec4 bv = vec4(0.0);
  if (OP != 2) {
    if (BCAST == 0) {
      bv = texelFetch(b_tex, int(p.b_skip / 4 + t));
    } else {
      // One division for the texel, then step through the fold (integer division is
      // scalarised on CPUs): e = (q * nb + j) * div + r.
      const uint q = e / p.div;
      uint r = e - q * p.div, j = q % p.nb;
      for (uint c = 0; c < 4; ++c) {
        bv[c] = texelFetch(b_tex, int(p.b_skip + j)).r;
        if (++r == p.div) {
          r = 0;
          if (++j == p.nb) j = 0;
        }
      }
    }
  }
  vec4 r = combine(av, bv);
  if (ACCUMULATE) r += texelFetch(acc_tex, int(p.out_skip / 4 + t));
  return r;
}
#endif

void main() {
#if EW_TEXEL
  STORE_TEXELS(p.n, p.out_skip, out_, out4, resultTexel)
#else
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float av = OP != 3 ? LOAD(a, p.a_skip + i) : 0.0;
    const float bv = OP != 2 ? LOAD(b, p.b_skip + bIndex(i)) : 0.0;
    float r = combine(av, bv);
    if (ACCUMULATE) r += LOAD(result, p.out_skip + i);
    STORE(result, p.out_skip + i, r);
  }
#endif
}
