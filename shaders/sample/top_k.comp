#version 450
// Sampling weights from logits (R,V): w[r,j] = exp((l[r,j] - max_r) / temperature) where
// l[r,j] is among the k largest of its row, else 0 (ties with the k-th largest all stay).
// random/categorical then draws from w. One workgroup per row: the k-th largest is found by
// a radix select over order-preserving keys (4 passes of 8 bits, a 256-bin histogram in
// shared memory), so the cost is 5 passes over the row whatever k is. logits and w in any
// float format: the keys are those of the f32 values read.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;  // 256 where the device allows, else fewer (any)

FLOATS(0, logits, readonly)  // (R,V) from l_skip
FLOATS(1, w, writeonly)      // (R,V) from w_skip
layout(push_constant) uniform Push {
  uint rows, cols, k;  // 1 <= k <= cols
  uint l_skip, w_skip;
  float inv_temperature;
} p;

shared uint hist[256];
shared uint s_prefix, s_remaining, s_max_key;

// Unsigned keys in the order of the floats: flip every bit of a negative, the sign of the rest.
uint keyOf(float f) {
  const uint b = floatBitsToUint(f);
  return (b & 0x80000000u) != 0u ? ~b : b | 0x80000000u;
}
float floatOf(uint key) {
  return uintBitsToFloat((key & 0x80000000u) != 0u ? key & 0x7fffffffu : ~key);
}

void main() {
  const uint lid = gl_LocalInvocationID.x;
  for (uint r = gl_WorkGroupID.x; r < p.rows; r += gl_NumWorkGroups.x) {
    const uint base = r * p.cols;
    if (lid == 0) {
      s_prefix = 0u;
      s_remaining = p.k;
      s_max_key = 0u;
    }
    // Pass i fixes key bits [31 - 8i, 24 - 8i] of the k-th largest: count the keys that match
    // the bits fixed so far by their next byte, then walk the bins from the top.
    for (uint pass = 0; pass < 4; ++pass) {
      for (uint b = lid; b < 256u; b += gl_WorkGroupSize.x) hist[b] = 0u;
      barrier();
      const uint shift = 24u - 8u * pass;
      const uint fixed_mask = pass == 0 ? 0u : ~0u << (32u - 8u * pass);
      const uint prefix = s_prefix;
      uint local_max = 0u;
      for (uint j = lid; j < p.cols; j += gl_WorkGroupSize.x) {
        const uint key = keyOf(LOAD(logits, p.l_skip + base + j));
        local_max = max(local_max, key);
        if ((key & fixed_mask) == prefix) atomicAdd(hist[(key >> shift) & 255u], 1u);
      }
      if (pass == 0) atomicMax(s_max_key, local_max);
      barrier();
      if (lid == 0) {
        uint remaining = s_remaining;
        for (int b = 255; b >= 0; --b) {
          const uint c = hist[b];
          if (c >= remaining) {
            s_prefix = prefix | (uint(b) << shift);
            break;
          }
          remaining -= c;
        }
        s_remaining = remaining;
      }
      barrier();
    }
    const uint threshold = s_prefix;
    const float top = floatOf(s_max_key);
    for (uint j = lid; j < p.cols; j += gl_WorkGroupSize.x) {
      const float l = LOAD(logits, p.l_skip + base + j);
      const float kept = keyOf(l) >= threshold ? exp((l - top) * p.inv_temperature) : 0.0;
      STORE(w, p.w_skip + base + j, kept);
    }
    barrier();  // the shared state is reset for the next row
  }
}
