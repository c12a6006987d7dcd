#version 450
// Fused softmax + cross-entropy, backward of the mean loss, per row r with target t:
//   dlogits[r, i] (= or +=) (exp((logits[r, i] - m[r]) - l[r]) - (i == t)) * dmean / count
// with the row max m, l = log(sum(exp(logits - m))) and count from forward's saved buffer and dmean read from the device (so a
// recorded step replays with a new upstream gradient). p is recomputed, never stored.
// Rows whose target is ignore_index or out of range get 0 (forward reported bad ones), and
// so does everything when count is 0. A row whose max is -inf (all logits -inf) has p = 0.
// No reduction: the row layout (softmax/rows.glsl) just lets the logits be read like forward's.
// Float tensors in any format (common/storage.glsl); the arithmetic is f32.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_arithmetic : require
// Subgroups: any size. Reductions go through common/reduce.glsl (subgroup operations within
// each subgroup, shared memory across them); a one-subgroup layout (kOneSubgroup) is a
// workgroup of the device's subgroup size, which the host's Auto picks only where that size is
// fixed (a split workgroup would give NaN, not a partial sum). Run at 8 and 16 lanes in CI.
#include "common/storage.glsl"

layout(constant_id = 4) const bool kAccumulate = false;

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
FLOATS(3, saved, readonly)                                                 // (2 rows + 1)
FLOATS(4, dmean, readonly)                                                 // (1)
FLOATS(5, dlogits, )  // (rows, C); not writeonly: kAccumulate reads it
layout(push_constant) uniform Push {
  uint rows;
  uint classes;  // C >= 1
  uint ignore_index;
  // First elements inside the bindings (ops/binding.h).
  uint logits_skip, targets_skip, saved_skip, dmean_skip, dlogits_skip;
} p;

float loadLogit(uint i) {
  return kTexelInput ? texelFetch(logit_texels, int(p.logits_skip + i)).x
                     : LOAD(logits, p.logits_skip + i);
}

void processRow(uint row, uint first, uint step) {
  const uint base = row * p.classes;
  const uint t = TARGET(p.targets_skip + row);
  const float count = LOAD(saved, p.saved_skip + 2 * p.rows);
  const bool used = t < p.classes && t != p.ignore_index && count > 0.0;
  const float g = used ? LOAD(dmean, p.dmean_skip) / count : 0.0;
  const float m = LOAD(saved, p.saved_skip + 2 * row);
  const float log_s = LOAD(saved, p.saved_skip + 2 * row + 1);
  for (uint i = first; i < p.classes; i += step) {
    precise const float centred = loadLogit(base + i) - m;  // precise: no reassociation
    // The guard keeps exp(-inf - (-inf)) = NaN out of an all -inf row.
    const float prob = m == kNegInf ? 0.0 : exp(centred - log_s);
    float d = used ? (prob - (i == t ? 1.0 : 0.0)) * g : 0.0;
    if (kAccumulate) d += LOAD(dlogits, p.dlogits_skip + base + i);
    STORE(dlogits, p.dlogits_skip + base + i, d);
  }
}

void main() { forEachRow(p.rows); }
