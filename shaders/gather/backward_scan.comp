#version 450
#extension GL_GOOGLE_include_directive : require
// dtable[v, d] (=|+=) sum of dout[j, d] over the positions j with ids[j] == v, in increasing
// j. One invocation per (v, d) scans all of ids: O(V * n * D) work but no scratch and one
// dispatch. Each sum has one owner and a fixed order, so the result is deterministic. dout and
// dtable in any float format; the sum is f32.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

layout(set = 0, binding = 0) readonly buffer Ids { uint ids[]; };     // (n) u32
FLOATS(1, dout, readonly)  // (n,D)
FLOATS(2, dtable, )        // (V,D); read only to accumulate
layout(set = 0, binding = 3) buffer Status { uint status[]; };        // {flags, largest bad id}
layout(push_constant) uniform Push {
  uint n, vocab, dim;
  uint skip[4];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  const uint total = p.vocab * p.dim;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint v = i / p.dim, d = i - v * p.dim;
    float sum = 0.0;
    for (uint j = 0; j < p.n; ++j) {
      const uint id = ids[p.skip[0] + j];
      if (id == v) sum += LOAD(dout, p.skip[1] + j * p.dim + d);
      // Out-of-range ids match no row; the first invocation reports them.
      if (i == 0 && id >= p.vocab) {  // kGatherBadId in ops/gather.h
        atomicOr(status[p.skip[3] + 0], 1u);
        atomicMax(status[p.skip[3] + 1], id);
      }
    }
    if (kAccumulate) STORE(dtable, p.skip[2] + i, LOAD(dtable, p.skip[2] + i) + sum);
    else STORE(dtable, p.skip[2] + i, sum);
  }
}
