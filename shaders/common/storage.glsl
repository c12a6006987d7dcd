// Float tensors in any storage format: f32, f16 or bf16, picked per binding by a
// specialization constant, read into f32 and stored from f32. Arithmetic and accumulation
// stay in f32 whatever a tensor is stored in; only the store rounds (to nearest even).
//
//   FLOATS(0, x, readonly)        declares binding 0 as the float tensor x and the constant
//                                 x_dtype (0 f32, 1 f16, 2 bf16; ops/storage.h gives it)
//   LOAD(x, i)                    element i of x as a float
//   STORE(y, i, v)                element i of y = v, rounded to y's format
//   TEXELS(1, k)                  declares binding 1 as a uniform texel buffer over the float
//                                 tensor k, and k_dtype
//   FETCH(k, i)                   texel i of k as a vec4 (a one-component view's value in .x)
//
// A kernel that includes this file is compiled twice (cmake/Shaders.cmake): as itself, for
// f32 tensors only, and as "<name>.s16" with STORAGE16 defined, which also declares each
// binding as uint16_t[] and so needs the device's storageBuffer16BitAccess. There a TEXELS
// binding is an unsigned view whatever the tensor's format (R32UI/RGBA32UI over f32, the
// bits; R16UI/RGBA16UI over f16 and bf16) and FETCH widens it; the f32 build's views are
// R32F/RGBA32F. The host picks
// the variant (ops/storage.h), so a module declares the 16-bit capability only where a
// 16-bit tensor is bound. Both read and write 16-bit values through integer bits, so no
// fp16 arithmetic feature is needed, and the roundings are the same on every device (the
// CPU references use ops/reference/half.h, bit for bit).
#ifndef COMMON_STORAGE_GLSL
#define COMMON_STORAGE_GLSL

#ifdef STORAGE16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

const uint kF32 = 0u, kF16 = 1u, kBf16 = 2u;

float widen16(uint bits, uint dtype) {
  return dtype == kF16 ? unpackHalf2x16(bits).x : uintBitsToFloat(bits << 16);
}

// bfloat16: the top half of the f32, rounded to nearest even; NaN stays a (quiet) NaN.
uint narrowBf16(float v) {
  const uint u = floatBitsToUint(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
  return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// IEEE half, rounded to nearest even in integer arithmetic (packHalf2x16 leaves the
// rounding to the implementation): overflow to inf, subnormals kept, NaN stays NaN.
uint narrowF16(float v) {
  const uint u = floatBitsToUint(v);
  const uint sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;
  if (a >= 0x477ff000u) return sign | 0x7c00u;  // 65520 and up round to inf
  if (a >= 0x38800000u) {                       // a normal half: rebias, round 13 bits off
    const uint r = a - 0x38000000u;
    return sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13);
  }
  if (a < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): zero
  // A subnormal half counts units of 2^-24: the 24-bit significand shifted right by
  // 126 - exponent (14 to 24 bits), rounded to nearest even.
  const uint m = (a & 0x7fffffu) | 0x800000u, shift = 126u - (a >> 23);
  const uint q = m >> shift, rest = m & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
  return sign | (q + ((rest > halfway || (rest == halfway && (q & 1u) != 0u)) ? 1u : 0u));
}

uint narrow16(float v, uint dtype) {
  return dtype == kF16 ? narrowF16(v) : narrowBf16(v);
}

// v as a tensor of that format would hold it: what a later pass reads back.
float roundToFormat(float v, uint dtype) {
  return dtype == kF32 ? v : widen16(narrow16(v, dtype), dtype);
}

#ifdef STORAGE16
#define FLOATS(BINDING, NAME, QUALIFIERS)                                                   \
  layout(constant_id = 100 + BINDING) const uint NAME##_dtype = kF32;                      \
  layout(set = 0, binding = BINDING) QUALIFIERS buffer NAME##_f32 { float NAME[]; };       \
  layout(set = 0, binding = BINDING) QUALIFIERS buffer NAME##_b16 { uint16_t NAME##_16[]; };
// Spec-constant conditions: the driver's compiler keeps one side.
#define LOAD(NAME, I) \
  (NAME##_dtype == kF32 ? NAME[I] : widen16(uint(NAME##_16[I]), NAME##_dtype))
vec4 widenTexel(uvec4 t, uint dtype) {
  if (dtype == kF32) return uintBitsToFloat(t);
  return vec4(widen16(t.x, dtype), widen16(t.y, dtype), widen16(t.z, dtype), widen16(t.w, dtype));
}
#define TEXELS(BINDING, NAME)                                                 \
  layout(constant_id = 100 + BINDING) const uint NAME##_dtype = kF32;        \
  layout(set = 0, binding = BINDING) uniform usamplerBuffer NAME;
#define FETCH(NAME, I) widenTexel(texelFetch(NAME, I), NAME##_dtype)
#define STORE(NAME, I, V)                                  \
  do {                                                     \
    const float v_ = (V);                                  \
    if (NAME##_dtype == kF32)                              \
      NAME[I] = v_;                                        \
    else                                                   \
      NAME##_16[I] = uint16_t(narrow16(v_, NAME##_dtype)); \
  } while (false)
#else
#define FLOATS(BINDING, NAME, QUALIFIERS)                              \
  layout(constant_id = 100 + BINDING) const uint NAME##_dtype = kF32; \
  layout(set = 0, binding = BINDING) QUALIFIERS buffer NAME##_f32 { float NAME[]; };
#define LOAD(NAME, I) NAME[I]
#define STORE(NAME, I, V) NAME[I] = (V)
#define TEXELS(BINDING, NAME)                                                 \
  layout(constant_id = 100 + BINDING) const uint NAME##_dtype = kF32;        \
  layout(set = 0, binding = BINDING) uniform samplerBuffer NAME;
#define FETCH(NAME, I) texelFetch(NAME, I)
#endif

#endif  // COMMON_STORAGE_GLSL
