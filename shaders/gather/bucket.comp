#version 450
// First pass of the bucketed gather backward: a stable counting sort of the positions
// 0..n-1 by id, in ONE workgroup (it is O(n + V) work, small next to the n*D sums).
// scratch (V + n u32s) afterwards holds
//   end[v]  = scratch[v]:      one past the last slot of bucket v (bucket v starts at end[v-1], or 0)
//   perm[k] = scratch[V + k]:  the positions of the ids equal to v, increasing, for k in bucket v
// so gather/backward_bucket can sum each row's gradients in a fixed order. Integer
// atomics only count; every slot comes from a deterministic rank, not from atomic order.
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) readonly buffer Ids { uint ids[]; };  // (n) u32
layout(set = 0, binding = 1) coherent buffer Scratch { uint scratch[]; };
layout(set = 0, binding = 2) buffer Status { uint status[]; };  // {flags, largest bad id}
layout(push_constant) uniform Push {
  uint n, vocab, dim;
  uint skip[4];  // where each binding's view starts, in elements (ops/binding.h)
} p;

const uint kNone = 0xFFFFFFFFu;  // >= every vocab the host accepts
shared uint chunk_ids[gl_WorkGroupSize.x];
shared uint partial[gl_WorkGroupSize.x];

void main() {
  const uint t = gl_LocalInvocationID.x, wg = gl_WorkGroupSize.x;
  // 1. Zero the counts.
  for (uint v = t; v < p.vocab; v += wg) scratch[p.skip[1] + v] = 0;
  memoryBarrierBuffer();
  barrier();  // counts are zero before any invocation adds to them

  // 2. Count each id (integer atomics: the totals do not depend on the order).
  for (uint j = t; j < p.n; j += wg) {
    const uint id = ids[p.skip[0] + j];
    if (id < p.vocab) {
      atomicAdd(scratch[p.skip[1] + id], 1u);
    } else {  // out of range: sorted nowhere, so no row sums it; kGatherBadId in ops/gather.h
      atomicOr(status[p.skip[2] + 0], 1u);
      atomicMax(status[p.skip[2] + 1], id);
    }
  }
  memoryBarrierBuffer();
  barrier();  // all counts are final before the scan reads them

  // 3. Exclusive scan of the counts: invocation t owns a contiguous segment of ids.
  const uint seg = (p.vocab + wg - 1) / wg;
  const uint seg_begin = min(t * seg, p.vocab), seg_end = min(seg_begin + seg, p.vocab);
  uint run = 0;
  for (uint v = seg_begin; v < seg_end; ++v) run += scratch[p.skip[1] + v];
  partial[t] = run;
  barrier();  // every segment total is in shared memory
  if (t == 0) {
    uint before = 0;
    for (uint k = 0; k < wg; ++k) {
      const uint c = partial[k];
      partial[k] = before;
      before += c;
    }
  }
  barrier();  // segment starts are ready
  run = partial[t];
  for (uint v = seg_begin; v < seg_end; ++v) {
    const uint c = scratch[p.skip[1] + v];
    scratch[p.skip[1] + v] = run;  // now the cursor: the next free slot of bucket v
    run += c;
  }
  memoryBarrierBuffer();
  barrier();  // every cursor is set before the scatter reads them

  // 4. Stable scatter, one chunk of wg positions at a time: a position's slot is its
  // bucket's cursor plus the number of equal ids before it in the chunk; the last of each
  // id in the chunk then moves the cursor past the chunk's entries.
  for (uint base = 0; base < p.n; base += wg) {
    const uint j = base + t;
    const uint id = j < p.n ? ids[p.skip[0] + j] : kNone;  // guard: the last chunk may be partial
    chunk_ids[t] = id;
    const uint cursor = id < p.vocab ? scratch[p.skip[1] + id] : 0;
    barrier();  // the chunk's ids are in shared memory; every cursor read is done
    if (id < p.vocab) {
      uint before = 0;
      bool last = true;
      for (uint k = 0; k < wg; ++k) {
        const bool same = chunk_ids[k] == id;
        before += same && k < t ? 1u : 0u;
        last = last && !(same && k > t);
      }
      scratch[p.skip[1] + p.vocab + cursor + before] = j;
      if (last) scratch[p.skip[1] + id] = cursor + before + 1;  // one writer per id per chunk
    }
    memoryBarrierBuffer();
    barrier();  // cursors are moved before the next chunk reads them and chunk_ids is reused
  }
}
