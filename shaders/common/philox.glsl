// Philox 4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// the counter-based generator every vkgrad random kernel draws from. The bits are a pure
// function of (counter, key), so any invocation can compute any element's randomness and
// a backward pass can regenerate a forward pass's mask instead of storing it.
//
// vkgrad's stream (engine/vkgrad/ops/random.h documents it; the CPU reference mirrors it):
//   rng state buffer, 4 u32: {seed_lo, seed_hi, offset_lo, offset_hi}
//   element i of stream s:  philox4x32_10(ctr = (i / 4, s, offset_lo, offset_hi),
//                                         key = (seed_lo, seed_hi))[i % 4]
#ifndef VKGRAD_PHILOX_GLSL
#define VKGRAD_PHILOX_GLSL

const uint kPhiloxM0 = 0xD2511F53u;  // round multipliers
const uint kPhiloxM1 = 0xCD9E8D57u;
const uint kPhiloxW0 = 0x9E3779B9u;  // key schedule increments (golden ratio, sqrt(3)-1)
const uint kPhiloxW1 = 0xBB67AE85u;

uvec4 philoxRound(uvec4 c, uvec2 k) {
  uint hi0, lo0, hi1, lo1;
  umulExtended(kPhiloxM0, c.x, hi0, lo0);
  umulExtended(kPhiloxM1, c.z, hi1, lo1);
  return uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
}

uvec4 philox4x32_10(uvec4 ctr, uvec2 key) {
  for (int r = 0; r < 10; ++r) {
    ctr = philoxRound(ctr, key);
    key += uvec2(kPhiloxW0, kPhiloxW1);  // the bump after the last round is unused
  }
  return ctr;
}

// The 4 words of counter block `block` (elements 4*block .. 4*block+3) of stream `stream`.
// state: {seed_lo, seed_hi, offset_lo, offset_hi}.
uvec4 philoxBlock(uvec4 state, uint stream, uint block) {
  return philox4x32_10(uvec4(block, stream, state.z, state.w), state.xy);
}

// The top 24 bits as a float in [0, 1): exact, so the CPU reference gets the same value.
float philoxUnit(uint bits) { return float(bits >> 8) * (1.0 / 16777216.0); }
// The same in (0, 1]: safe to take the log of.
float philoxUnitNonZero(uint bits) { return (float(bits >> 8) + 1.0) * (1.0 / 16777216.0); }

#endif  // VKGRAD_PHILOX_GLSL
