// Body of optimizer/sumsq_texel.comp (one gradient) and optimizer/sumsq_many.comp (many in one
// dispatch): stage 1 of the global gradient norm with the gradient fetched four floats at a
// time from an RGBA32F texel buffer (scalar storage loads cost several times more on
// lavapipe). Invocation t of a tensor's workgroup g (of G) sums the squares of texels
// g*WG + t, then every G*WG-th one, in order; invocation 0 of workgroup 0 then adds the
// partial last texel's elements; each workgroup adds its WG sums in a fixed tree and writes
// partial[base + its index]. So the partials are the same bits every run, and the same for
// a tensor whether it is summed alone or with others.
layout(local_size_x_id = 0) in;  // a power of two (the tree halves it)

layout(set = 0, binding = 0) uniform samplerBuffer grad_tex;  // RGBA32F
layout(set = 0, binding = 1) buffer Partial { float partial[]; };
#if SUMSQ_MANY
// 8 words per tensor (ops/optimizer.cpp writes them when recording): word 1 its first element in
// the binding (a multiple of 4), 4 its size, 6 and 7 its run of workgroups (first, count).
layout(set = 0, binding = 2) readonly buffer Table { uint table[]; };
layout(push_constant) uniform Push {
  uint count, base;  // tensors; the first partial slot
  uint at;           // the table's first word in its binding
} p;
#else
layout(push_constant) uniform Push {
  uint n, base;
  uint skip;  // the first element in the binding, a multiple of 4
} p;
#endif

shared float sums[gl_WorkGroupSize.x];

float sumTexels(uint group, uint groups, uint n, uint skip) {
  const uint first = group * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  float s = 0.0;
  for (uint t = first; t < n / 4; t += groups * gl_WorkGroupSize.x) {
    const vec4 v = texelFetch(grad_tex, int(skip / 4 + t));
    s += v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w;
  }
  if (first == 0 && n % 4 != 0) {
    const vec4 v = texelFetch(grad_tex, int(skip / 4 + n / 4));
    for (uint c = 0; c < n % 4; ++c) s += v[c] * v[c];
  }
  return s;
}

void main() {
  const uint t = gl_LocalInvocationID.x;
#if SUMSQ_MANY
  const uint group = gl_WorkGroupID.x;
  uint lo = 0, hi = p.count - 1;  // the last segment whose run starts at or before group
  while (lo < hi) {
    const uint mid = (lo + hi + 1) / 2;
    if (table[p.at + 8 * mid + 6] <= group) lo = mid; else hi = mid - 1;
  }
  const uint e = p.at + 8 * lo;
  sums[t] = sumTexels(group - table[e + 6], table[e + 7], table[e + 4], table[e + 1]);
#else
  sums[t] = sumTexels(gl_WorkGroupID.x, gl_NumWorkGroups.x, p.n, p.skip);
#endif
  for (uint half_size = gl_WorkGroupSize.x / 2; half_size > 0; half_size /= 2) {
    barrier();  // the previous level's sums are in shared memory
    if (t < half_size) sums[t] += sums[t + half_size];
  }
  if (t == 0) partial[p.base + gl_WorkGroupID.x] = sums[0];
}
