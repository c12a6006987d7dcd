#version 450
#extension GL_GOOGLE_include_directive : require
// Second pass of the bucketed gather backward: dtable[v, d] (=|+=) the sum of
// dout[j, d] over bucket v's positions j (sorted by gather/bucket), in increasing j.
// One invocation per (v, d), grid-stride; each sum has one owner and a fixed order. dout and
// dtable in any float format; the sum is f32.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

layout(set = 0, binding = 0) readonly buffer Scratch { uint scratch[]; };  // end[V], perm[n]
FLOATS(1, dout, readonly)  // (n,D)
FLOATS(2, dtable, )        // (V,D); read only to accumulate
layout(push_constant) uniform Push {
  uint n, vocab, dim;
  uint skip[4];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  const uint total = p.vocab * p.dim;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint v = i / p.dim, d = i - v * p.dim;
    const uint begin = v == 0 ? 0 : scratch[p.skip[0] + v - 1], end = scratch[p.skip[0] + v];
    float sum = 0.0;
    for (uint k = begin; k < end; ++k) sum += LOAD(dout, p.skip[1] + scratch[p.skip[0] + p.vocab + k] * p.dim + d);
    if (kAccumulate) STORE(dtable, p.skip[2] + i, LOAD(dtable, p.skip[2] + i) + sum);
    else STORE(dtable, p.skip[2] + i, sum);
  }
}
