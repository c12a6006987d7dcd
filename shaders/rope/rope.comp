#version 450
// Rotary position embedding, Hugging Face Llama's "rotate_half" form: in each (b, t, h) row
// of x (B,T,H,D), channel pairs (i, i + D/2), i < D/2, turn by the angle p * inv_freq[i],
// p = t + offset the row's sequence position:
//   y[i] = x[i] cos - x[i + D/2] sin,   y[i + D/2] = x[i + D/2] cos + x[i] sin.
// kInverse turns by -angle instead: the backward (the rotation's transpose is its inverse).
// The offset is 0, or (kPosition) word 0 of the position buffer, read on the device, so a
// decoding step's recorded commands serve every position. Only heads h < p.rotated turn; the
// rest are copied (the value heads of a fused q, k, v row viewed as (B,T,H,D)). One
// invocation per pair; each
// reads both elements before it writes them, so y may be x itself.
//
// The angle is PyTorch's: inv_freq as f32 (the host computes it, ops/rope.h), then the one
// product float(p) * inv_freq[i] rounded to f32 (exact position for p < 2^24). Its cosine
// and sine are taken here rather than with GLSL's cos/sin, whose precision the spec leaves
// open (absolute 2^-11 on [-pi, pi], nothing beyond) and which differs between drivers:
// Cody-Waite reduction by pi/2 in four parts (k * part exact for angles up to 2^17 pi/2,
// ~2e5 rad: positions to 128k at the lowest frequency) to r in about [-pi/4, pi/4], then
// Taylor polynomials to r^9 and r^10 (truncation < 2e-9). Within ~1e-7 of the true cosine
// and sine of the f32 angle, as PyTorch's (Sleef, 1 ulp) are: the two agree to a few f32
// ulps of 1. Tensors in any float format (common/storage.glsl), the arithmetic f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kInverse = false;
layout(constant_id = 2) const bool kPosition = false;
layout(constant_id = 3) const bool kAccumulate = false;  // y += the rotation (gradients)

FLOATS(0, x, readonly)                                                  // (B,T,H,D)
layout(set = 0, binding = 1) readonly buffer InvFreq { float inv_freq[]; };  // (D/2) f32
layout(set = 0, binding = 2) readonly buffer Position { uint position[]; };  // (1) u32
FLOATS(3, y, )  // (B,T,H,D); not writeonly: kAccumulate reads it
layout(push_constant) uniform Push {
  uint pairs;  // B * T * H * D / 2
  uint t;      // T
  uint h;      // H
  uint half_d;  // D / 2
  uint rotated;  // heads [0, rotated) of each (b, t) turn, the others are copied
  uint x_skip, inv_freq_skip, position_skip, y_skip;  // first elements inside the bindings
} p;

// pi/2 = kPio2[0] + kPio2[1] + kPio2[2] + kPio2[3] to ~1e-16; the first three have at most 7
// significant bits, so k * part is exact for k < 2^17.
const float kPio2A = 1.578125, kPio2B = -0.00732421875, kPio2C = -4.4703483581542969e-06,
            kPio2D = 1.589325471e-08;
const float kTwoOverPi = 0.636619747;

// (cos a, sin a) for a >= 0.
vec2 cosSin(float a) {
  const float k = floor(a * kTwoOverPi + 0.5);
  float r = a - k * kPio2A;  // exact: a and k * kPio2A are within a factor of 2 (Sterbenz)
  r -= k * kPio2B;
  r -= k * kPio2C;
  r -= k * kPio2D;
  const float r2 = r * r;
  const float s =
      r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 / 362880.0))));
  const float c =
      1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 +
                               r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 - r2 / 3628800.0))));
  switch (uint(k) & 3u) {
    case 0u: return vec2(c, s);
    case 1u: return vec2(-s, c);
    case 2u: return vec2(-c, -s);
    default: return vec2(s, -c);
  }
}

void main() {
  const uint offset = kPosition ? position[p.position_skip] : 0u;
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  for (uint q = gl_GlobalInvocationID.x; q < p.pairs; q += stride) {
    const uint row = q / p.half_d, i = q - row * p.half_d;
    const uint pos = (row / p.h) % p.t + offset;
    // A copied head turns by 0: cos 1, sin 0, exactly.
    const vec2 cs = row % p.h < p.rotated ? cosSin(float(pos) * inv_freq[p.inv_freq_skip + i])
                                          : vec2(1.0, 0.0);
    const float sn = kInverse ? -cs.y : cs.y;
    const uint lo = row * 2u * p.half_d + i, hi = lo + p.half_d;
    const float a = LOAD(x, p.x_skip + lo), b = LOAD(x, p.x_skip + hi);
    float ya = a * cs.x - b * sn, yb = b * cs.x + a * sn;
    if (kAccumulate) {
      ya += LOAD(y, p.y_skip + lo);
      yb += LOAD(y, p.y_skip + hi);
    }
    STORE(y, p.y_skip + lo, ya);
    STORE(y, p.y_skip + hi, yb);
  }
}
