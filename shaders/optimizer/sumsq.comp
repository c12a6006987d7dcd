#version 450
// Stage 1 of the global gradient norm for a view on any 4 bytes (optimizer/sumsq_texel reads
// views on 16 bytes four floats at a time): each workgroup writes the sum of squares of its
// share of one gradient tensor to partial[base + group]. Invocation t of group g sums
// elements g*WG + t, then every gl_NumWorkGroups*WG-th one, in order, and the group adds
// the WG sums in a fixed tree, so the partials are the same bits every run.
layout(local_size_x_id = 0) in;  // a power of two (the tree halves it)

layout(set = 0, binding = 0) readonly buffer Grad { float grad[]; };  // (n)
layout(set = 0, binding = 1) buffer Partial { float partial[]; };     // (slots of all tensors)
layout(push_constant) uniform Push { uint n, base, skip; } p;  // skip: first element

shared float sums[gl_WorkGroupSize.x];

void main() {
  const uint t = gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x)
    s += grad[p.skip + i] * grad[p.skip + i];
  sums[t] = s;
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    barrier();  // the previous level's sums are in shared memory
    if (t < half_size) sums[t] += sums[t + half_size];
  }
  if (t == 0) partial[p.base + gl_WorkGroupID.x] = sums[0];
}
