#version 450
// Stage 1 of the global gradient norm over many tensors in one dispatch: optim/sumsq's
// loop, per tensor, with the grad binding spanning them all. A segment table (8 words per
// tensor, as optim/adamw_many reads it; ops/optim.cpp writes it when recording) gives each
// tensor's first element in the binding (word 1), its size (4) and its run of workgroups
// (6: first, 7: count). Workgroup w writes partial[base + w]: the same slots, sums and
// order as one optim/sumsq dispatch per tensor, so the same bits.
layout(local_size_x_id = 0) in;  // a power of two (the tree halves it)

layout(set = 0, binding = 0) readonly buffer Grad { float grad[]; };  // every tensor's
layout(set = 0, binding = 1) buffer Partial { float partial[]; };
layout(set = 0, binding = 2) readonly buffer Table { uint table[]; };
layout(push_constant) uniform Push {
  uint count, base;  // tensors; the first partial slot
  uint at;           // the table's first word in its binding
} p;

shared float sums[gl_WorkGroupSize.x];

void main() {
  const uint group = gl_WorkGroupID.x, t = gl_LocalInvocationID.x;
  uint lo = 0, hi = p.count - 1;  // the last segment whose run starts at or before group
  while (lo < hi) {
    const uint mid = (lo + hi + 1) / 2;
    if (table[p.at + 8 * mid + 6] <= group) lo = mid; else hi = mid - 1;
  }
  const uint e = p.at + 8 * lo;
  const uint skip = table[e + 1], n = table[e + 4], stride = table[e + 7] * gl_WorkGroupSize.x;
  float s = 0.0;
  for (uint i = (group - table[e + 6]) * gl_WorkGroupSize.x + t; i < n; i += stride)
    s += grad[skip + i] * grad[skip + i];
  sums[t] = s;
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    barrier();  // the previous level's sums are in shared memory
    if (t < half_size) sums[t] += sums[t + half_size];
  }
  if (t == 0) partial[p.base + group] = sums[0];
}
