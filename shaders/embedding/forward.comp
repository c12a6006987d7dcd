#version 450
// out[r, d] = table[ids[r], d]: one invocation per output element, grid-stride. Table row v
// starts at v * row_stride (row_stride = dim for a dense table; below dim rows overlap, as the
// windows of a token stream do). An id outside the table reads nothing: its row of out is 0
// and the status buffer records it.
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Ids { uint ids[]; };       // (n) u32
layout(set = 0, binding = 1) readonly buffer Table { float table[]; };  // V rows of D
layout(set = 0, binding = 2) writeonly buffer Out { float out_rows[]; };  // (n,D)
layout(set = 0, binding = 3) buffer Status { uint status[]; };          // {flags, largest bad id}
layout(push_constant) uniform Push {
  uint n, vocab, dim, row_stride;
  uint skip[4];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  const uint total = p.n * p.dim;
  for (uint i = gl_GlobalInvocationID.x; i < total; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint r = i / p.dim, d = i - r * p.dim;
    const uint id = ids[p.skip[0] + r];
    if (id < p.vocab) {
      out_rows[p.skip[2] + i] = table[p.skip[1] + id * p.row_stride + d];
    } else {  // never read past the table; one invocation per row reports it
      out_rows[p.skip[2] + i] = 0.0;
      if (d == 0) {  // kEmbeddingBadId in ops/embedding.h
        atomicOr(status[p.skip[3] + 0], 1u);
        atomicMax(status[p.skip[3] + 1], id);
      }
    }
  }
}
