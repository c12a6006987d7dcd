#version 450
#extension GL_GOOGLE_include_directive : require
// out[r, d] = table[ids[r], d]: one invocation per output element, grid-stride. Table row v
// starts at v * row_stride (row_stride = dim for a dense table; below dim rows overlap, as the
// windows of a token stream do). An id outside the table reads nothing: its row of out is 0
// and the status buffer records it.
// kVec4 (dim, row_stride and both views' skips multiples of 4): one invocation per 4 columns,
// 16-byte loads and stores (a scalar storage access is a loop over the lanes on llvmpipe);
// f32 tables and outputs only. table and out otherwise in any float format (a u32 table moves
// through as f32 words, bits unchanged).
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kVec4 = false;

layout(set = 0, binding = 0) readonly buffer Ids { uint ids[]; };       // (n) u32
FLOATS(1, table, readonly)      // V rows of D
FLOATS(2, out_rows, writeonly)  // (n,D)
layout(set = 0, binding = 3) buffer Status { uint status[]; };          // {flags, largest bad id}
layout(set = 0, binding = 1) readonly buffer Table4 { vec4 table4[]; };     // the same two,
layout(set = 0, binding = 2) writeonly buffer Out4 { vec4 out_rows4[]; };  // with kVec4
layout(push_constant) uniform Push {
  uint n, vocab, dim, row_stride;
  uint skip[4];  // where each binding's view starts, in elements (ops/binding.h)
} p;

// An id outside the table: one invocation per row reports it (kGatherBadId in
// ops/gather.h).
void reportBadId(uint id) {
  atomicOr(status[p.skip[3] + 0], 1u);
  atomicMax(status[p.skip[3] + 1], id);
}

void main() {
  const uint step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  if (kVec4) {
    const uint dim4 = p.dim / 4, total4 = p.n * dim4;
    for (uint i = gl_GlobalInvocationID.x; i < total4; i += step) {
      const uint r = i / dim4, d4 = i - r * dim4;
      const uint id = ids[p.skip[0] + r];
      vec4 row = vec4(0.0);  // never read past the table
      if (id < p.vocab) {
        row = table4[(p.skip[1] + id * p.row_stride) / 4 + d4];
      } else if (d4 == 0) {
        reportBadId(id);
      }
      out_rows4[p.skip[2] / 4 + i] = row;
    }
    return;
  }
  const uint total = p.n * p.dim;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += step) {
    const uint r = i / p.dim, d = i - r * p.dim;
    const uint id = ids[p.skip[0] + r];
    if (id < p.vocab) {
      STORE(out_rows, p.skip[2] + i, LOAD(table, p.skip[1] + id * p.row_stride + d));
    } else {  // never read past the table
      STORE(out_rows, p.skip[2] + i, 0.0);
      if (d == 0) reportBadId(id);
    }
  }
}
