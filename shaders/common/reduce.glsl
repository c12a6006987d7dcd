// Workgroup-wide reductions for one-dimensional workgroups: subgroup ops inside each
// subgroup, then one shared-memory slot per subgroup, summed in the same order by every
// invocation, so all of them get the same bits (no float atomics, deterministic).
//
// The includer, before including this file:
//  - enables GL_KHR_shader_subgroup_arithmetic;
//  - declares its workgroup size (layout(local_size_x_id = 0) in;): the scratch arrays
//    are sized by gl_WorkGroupSize.x, the subgroup count for the smallest possible
//    subgroup size, so the subgroup size is never assumed (8 on lavapipe, 32 on NVIDIA);
//  - declares `const bool kOneSubgroup` (normally a specialization constant). true
//    promises the workgroup is one subgroup: the shared-memory stage and its barriers
//    then compile away, which on lavapipe makes a row-wise kernel ~2x faster (a shader
//    with barriers runs its invocations as coroutines). Should the device split the
//    workgroup anyway, the reductions return NaN rather than a silently partial result.
// Every function here must be called from uniform control flow (they contain barriers).
//
// NO_SUBGROUP_ARITHMETIC (the ".nsa" build, for a device without subgroup arithmetic): every
// invocation stores its value, a tree folds the slots pairwise into slot 0, and every
// invocation reads that one, so all get the same bits (kOneSubgroup changes nothing there).
#ifndef VKGRAD_COMMON_REDUCE_GLSL
#define VKGRAD_COMMON_REDUCE_GLSL

#include "common/online_softmax.glsl"

shared float reduce_scratch_a[gl_WorkGroupSize.x];
shared float reduce_scratch_b[gl_WorkGroupSize.x];

#ifdef NO_SUBGROUP_ARITHMETIC

// The largest power of two below the workgroup size (for 96 lanes: 64), where the tree starts.
uint reduceTreeTop() {
  uint top = 1;
  while (top * 2 < gl_WorkGroupSize.x) top *= 2;
  return top;
}

// Each level folds slot i + s into slot i for every i < s with a partner; after the last,
// slot 0 holds the result, which every invocation then reads. log2(W) barriers and one read
// per folding invocation, instead of W reads by every invocation.
float workgroupSum(float v) {
  const uint i = gl_LocalInvocationID.x;
  barrier();  // the previous reduction's readers are done with the scratch slots
  reduce_scratch_a[i] = v;
  for (uint s = reduceTreeTop(); s > 0; s /= 2) {
    barrier();
    if (i < s && i + s < gl_WorkGroupSize.x) reduce_scratch_a[i] += reduce_scratch_a[i + s];
  }
  barrier();
  return reduce_scratch_a[0];
}

float workgroupMax(float v) {
  const uint i = gl_LocalInvocationID.x;
  barrier();
  reduce_scratch_a[i] = v;
  for (uint s = reduceTreeTop(); s > 0; s /= 2) {
    barrier();
    if (i < s && i + s < gl_WorkGroupSize.x)
      reduce_scratch_a[i] = max(reduce_scratch_a[i], reduce_scratch_a[i + s]);
  }
  barrier();
  return reduce_scratch_a[0];
}

MaxSum workgroupMaxSum(MaxSum v) {
  const uint i = gl_LocalInvocationID.x;
  barrier();
  reduce_scratch_a[i] = v.m;
  reduce_scratch_b[i] = v.s;
  for (uint s = reduceTreeTop(); s > 0; s /= 2) {
    barrier();
    if (i < s && i + s < gl_WorkGroupSize.x) {
      const MaxSum folded = maxSumCombine(MaxSum(reduce_scratch_a[i], reduce_scratch_b[i]),
                                          MaxSum(reduce_scratch_a[i + s], reduce_scratch_b[i + s]));
      reduce_scratch_a[i] = folded.m;
      reduce_scratch_b[i] = folded.s;
    }
  }
  barrier();
  return MaxSum(reduce_scratch_a[0], reduce_scratch_b[0]);
}

#else

// The promise of kOneSubgroup holds (always true when kOneSubgroup is false).
bool reduceIsWhole() { return !kOneSubgroup || gl_NumSubgroups == 1; }

float workgroupSum(float v) {
  v = subgroupAdd(v);
  if (kOneSubgroup) return reduceIsWhole() ? v : uintBitsToFloat(0x7fc00000u);
  barrier();  // the previous reduction's readers are done with the scratch slots
  if (subgroupElect()) reduce_scratch_a[gl_SubgroupID] = v;
  barrier();  // every subgroup's partial is in shared memory before anyone reads
  float total = reduce_scratch_a[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) total += reduce_scratch_a[i];
  return total;
}

float workgroupMax(float v) {
  v = subgroupMax(v);
  if (kOneSubgroup) return reduceIsWhole() ? v : uintBitsToFloat(0x7fc00000u);
  barrier();  // the previous reduction's readers are done with the scratch slots
  if (subgroupElect()) reduce_scratch_a[gl_SubgroupID] = v;
  barrier();  // every subgroup's partial is in shared memory before anyone reads
  float total = reduce_scratch_a[0];
  for (uint i = 1; i < gl_NumSubgroups; ++i) total = max(total, reduce_scratch_a[i]);
  return total;
}

// The online-softmax pair of the whole workgroup (see common/online_softmax.glsl).
MaxSum workgroupMaxSum(MaxSum v) {
  v = subgroupMaxSum(v);
  if (kOneSubgroup) return reduceIsWhole() ? v : MaxSum(0.0, uintBitsToFloat(0x7fc00000u));
  barrier();  // the previous reduction's readers are done with the scratch slots
  if (subgroupElect()) {
    reduce_scratch_a[gl_SubgroupID] = v.m;
    reduce_scratch_b[gl_SubgroupID] = v.s;
  }
  barrier();  // every subgroup's pair is in shared memory before anyone reads
  MaxSum total = MaxSum(reduce_scratch_a[0], reduce_scratch_b[0]);
  for (uint i = 1; i < gl_NumSubgroups; ++i)
    total = maxSumCombine(total, MaxSum(reduce_scratch_a[i], reduce_scratch_b[i]));
  return total;
}

#endif  // NO_SUBGROUP_ARITHMETIC
#endif
