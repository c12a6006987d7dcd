#version 450
// Gradients of mean over rows of the row sums of term(kind, a, b) (terms.glsl), for an
// upstream gradient g of the mean read on the device (so a recorded step replays):
//   KIND 0 Bce, d/dl:        g / rows * (sigmoid(l) - t)
//   KIND 1 Mse, d/dl:        g / rows * 2 (s - t) s (1 - s),  s = sigmoid(l)
//   KIND 2 Kl, d/dmu:        g / rows * mu
//   KIND 3 Kl, d/dlog sigma: g / rows * (exp(2 log sigma) - 1)
// out (= or +=) that, elementwise. a, b, dmean and out in any float format; the arithmetic is
// f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint KIND = 0;
layout(constant_id = 2) const bool kAccumulate = false;

#include "common/ew_math.glsl"

FLOATS(0, a, readonly)      // (rows, D)
FLOATS(1, b, readonly)      // (rows, D)
FLOATS(2, dmean, readonly)  // (1)
FLOATS(3, out_values, )     // (rows, D); read to accumulate
layout(push_constant) uniform Push {
  uint n, rows;
  uint a_skip, b_skip, dmean_skip, out_skip;
} p;

void main() {
  const float g = LOAD(dmean, p.dmean_skip) / float(p.rows);
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const float x = LOAD(a, p.a_skip + i), y = LOAD(b, p.b_skip + i);
    float d;
    if (KIND == 0u) {
      d = ewSigmoid(x) - y;
    } else if (KIND == 1u) {
      const float s = ewSigmoid(x);
      d = 2.0 * (s - y) * s * (1.0 - s);
    } else if (KIND == 2u) {
      d = x;
    } else {
      d = ewExpm1(2.0 * y);
    }
    d *= g;
    if (kAccumulate) d += LOAD(out_values, p.out_skip + i);
    STORE(out_values, p.out_skip + i, d);
  }
}
