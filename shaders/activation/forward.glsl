// Body of activation/forward.comp (storage buffers, one float per step: any device, any
// offset) and forward_texel.comp (x fetched four floats at a time from an RGBA32F texel
// buffer, about 5x faster than storage loads on lavapipe, and y stored 16 bytes at a time):
// y = f(x), elementwise.
#include "activation/activation.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
  uint n;       // elements
  float param;  // LeakyRelu slope, Elu alpha
  // Element offsets inside the bindings (multiples of 4 in the texel variant).
  uint x_skip, y_skip;
} p;

// y may be x itself: every step reads x before it writes the same elements of y.
#if EW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer x_tex;  // RGBA32F over (n)
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };  // (n)
layout(set = 0, binding = 1) writeonly buffer Y4 { vec4 y4[]; };  // the same, 16 bytes a step
#include "common/texel_store.glsl"

vec4 resultTexel(uint t) {
  const vec4 v = texelFetch(x_tex, int(p.x_skip / 4 + t));
  vec4 r;
  for (uint c = 0; c < 4; ++c) r[c] = activate(v[c], p.param);
  return r;
}
#else
FLOATS(0, x, readonly)   // (n)
FLOATS(1, y, writeonly)  // (n)
#endif

void main() {
#if EW_TEXEL
  STORE_TEXELS(p.n, p.y_skip, y, y4, resultTexel)
#else
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    STORE(y, p.y_skip + i, activate(LOAD(x, p.x_skip + i), p.param));
#endif
}
