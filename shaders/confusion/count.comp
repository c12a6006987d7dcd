#version 450
// counts[label][argmax of the row's logits] += 1 (ops/confusion.h): one row per invocation
// step, grid-stride. argmax is the first maximum, and a NaN beats any number (numpy's rule);
// a label >= C is counted nowhere. u32 atomics: exact, order-independent counts. The logits
// in any float format, compared as f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;

FLOATS(0, logits, readonly)                                               // (rows,C)
layout(set = 0, binding = 1) readonly buffer Labels { uint labels[]; };   // (rows)
layout(set = 0, binding = 2) buffer Counts { uint counts[]; };            // (C,C), += only
layout(push_constant) uniform Push {
  uint rows, classes;
  uint skip[3];  // where each binding's view starts, in elements (ops/binding.h)
} p;

void main() {
  // The loop bound is also the guard for the grid rounded up to whole workgroups.
  for (uint r = gl_GlobalInvocationID.x; r < p.rows; r += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint label = labels[p.skip[1] + r];
    if (label >= p.classes) continue;  // ignored: never index past the matrix
    const uint row = p.skip[0] + r * p.classes;
    uint arg = 0;
    float best = LOAD(logits, row);
    if (!isnan(best)) {
      for (uint j = 1; j < p.classes; ++j) {
        const float v = LOAD(logits, row + j);
        if (isnan(v)) {
          arg = j;
          break;
        }
        if (v > best) {  // strict: the first of equal maxima stays
          best = v;
          arg = j;
        }
      }
    }
    atomicAdd(counts[p.skip[2] + label * p.classes + arg], 1u);
  }
}
