#version 450
#extension GL_GOOGLE_include_directive : require
// dbias[o] (=|+=) Σ_{n,q} dy[n, o, q]: one invocation per output channel, summing its images
// in order, so the bits do not depend on the device (no atomics, no reduction tree). There are
// few channels; the sum reads the whole of dy once.
#include "common/storage.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

FLOATS(0, dy, readonly)  // (N,O,OH,OW), skip_a
FLOATS(1, dbias, )       // (O), skip_b; read only to accumulate

#include "conv2d/geometry.glsl"

void main() {
  const uint o = gl_GlobalInvocationID.x;
  if (o >= p.outs) return;  // the grid rounded up to whole workgroups
  const uint pixels = outPixels();
  float sum = 0.0;
  for (uint n = 0; n < p.images; ++n) {
    const uint at = p.skip_a + (n * p.outs + o) * pixels;
    float image = 0.0;  // per image first: shorter running sums, smaller rounding error
    for (uint q = 0; q < pixels; ++q) image += LOAD(dy, at + q);
    sum += image;
  }
  const uint to = p.skip_b + o;
  STORE(dbias, to, kAccumulate ? LOAD(dbias, to) + sum : sum);
}
