#version 450
// out[4w + k] = float(byte k of words[w]) * scale + shift (ops/bytes_to_float.h): one word per
// invocation step, grid-stride. Bytes are little-endian in a word: byte k is bits 8k..8k+7.
// out in any float format (common/storage.glsl), each value rounded once as it is stored.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
// out is f32 and starts on a whole vec4 of its binding: one 16-byte store per word (the
// host's choice).
layout(constant_id = 1) const bool kVec4 = false;

layout(set = 0, binding = 0) readonly buffer Words { uint words[]; };  // (n/4) u32
FLOATS(1, out_values, writeonly)                                       // (n)
// The same binding as 16-byte words (out_skip % 4 == 0 when kVec4).
layout(set = 0, binding = 1) writeonly buffer Out4 { vec4 out4[]; };
layout(push_constant) uniform Push {
  uint n_words;
  uint words_skip, out_skip;  // where each view starts in its binding, in elements
  float scale, shift;
} p;

void main() {
  // The loop bound is also the guard for the grid rounded up to whole workgroups.
  for (uint w = gl_GlobalInvocationID.x; w < p.n_words; w += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint word = words[p.words_skip + w];
    // Exact: bytes are small integers, and (word >> 8k) & 0xFF needs no float rounding.
    const vec4 bytes = vec4(uvec4(word, word >> 8, word >> 16, word >> 24) & 0xFFu);
    const vec4 v = bytes * p.scale + p.shift;
    if (kVec4) {
      out4[p.out_skip / 4 + w] = v;
    } else {
      const uint o = p.out_skip + 4 * w;
      for (uint k = 0; k < 4; ++k) STORE(out_values, o + k, v[k]);
    }
  }
}
