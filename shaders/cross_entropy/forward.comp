#version 450
// Fused softmax + cross-entropy, forward, per row r with target t = targets[r]:
//   m[r] = max_i logits[r, i], l[r] = log(sum_i exp(logits[r, i] - m[r]))
//                                                 saved for backward: saved[2r], saved[2r + 1]
//   loss[r] = (m[r] - logits[r, t]) + l[r]        0 when t is ignore_index or out of range
// m and l are kept apart because lse = m + l, rounded to fp32, would lose l's precision to
// m's magnitude (ulp(1e4) = 1e-3, a 1e-3 relative error in every probability).
// The (max, sum) pair is gathered online (common/online_softmax.glsl), so each row is read
// once, plus one load of the target's logit; p is never materialised. A target logit of
// -inf (also in a row that is all -inf, whose lse is -inf) gives loss +inf, not NaN.
//
// A target that is neither < C nor ignore_index is never used as an index: its row counts
// as ignored and status records it (kCrossEntropyBadTarget in ops/cross_entropy.h).
// Layouts: softmax/rows.glsl. logits, losses and saved in any float format
// (common/storage.glsl), each as its view says; the statistics are computed in f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

#include "softmax/rows.glsl"

FLOATS(0, logits, readonly)                                                // (rows, C)
layout(set = 0, binding = 1) uniform samplerBuffer logit_texels;  // if kTexelInput (f32)
#ifdef FOUR_STORAGE_BUFFERS
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads the targets
// through an R32UI texel view, which counts against the sampled-image limit instead.
layout(set = 0, binding = 2) uniform usamplerBuffer target_texels;  // (rows) u32
#define TARGET(I) texelFetch(target_texels, int(I)).x
#else
layout(set = 0, binding = 2) readonly buffer Targets { uint targets[]; };  // (rows) u32
#define TARGET(I) targets[I]
#endif
FLOATS(3, losses, writeonly)                                               // (rows)
FLOATS(4, saved, writeonly)                                                // (2 rows + 1)
layout(set = 0, binding = 5) buffer Status { uint status[]; };             // {flags, max bad}
layout(push_constant) uniform Push {
  uint rows;
  uint classes;       // C >= 1
  uint ignore_index;  // rows with this target have loss 0
  // First elements inside the bindings (ops/binding.h).
  uint logits_skip, targets_skip, losses_skip, saved_skip, status_skip;
} p;

float loadLogit(uint i) {
  return kTexelInput ? texelFetch(logit_texels, int(p.logits_skip + i)).x
                     : LOAD(logits, p.logits_skip + i);
}

void processRow(uint row, uint first, uint step) {
  const uint base = row * p.classes;
  MaxSumAcc acc = kMaxSumAccEmpty;
  // i < C: idle lanes keep the empty pair, which the combine ignores.
  for (uint i = first; i < p.classes; i += step) acc = maxSumAccAdd(acc, loadLogit(base + i));
  const MaxSum stats = rowMaxSum(maxSumAccResult(acc));
  if (first != 0) return;  // one writer per row
  const float log_s = log(stats.s);  // -inf for an all -inf row (s = 0)
  const uint t = TARGET(p.targets_skip + row);
  float loss = 0.0;
  if (t < p.classes && t != p.ignore_index) {
    const float target_logit = loadLogit(base + t);
    // -inf - (-inf) would be NaN; the target's probability is 0 either way.
    precise const float gap = stats.m - target_logit;  // exact when close; keep it first
    loss = target_logit == kNegInf ? 1.0 / 0.0 : gap + log_s;
  } else if (t != p.ignore_index) {  // out of range: never read logits[t]; report it
    atomicOr(status[p.status_skip], 1u);
    atomicMax(status[p.status_skip + 1], t);
  }
  STORE(losses, p.losses_skip + row, loss);
  STORE(saved, p.saved_skip + 2 * row, stats.m);
  STORE(saved, p.saved_skip + 2 * row + 1, log_s);
}

void main() { forEachRow(p.rows); }
