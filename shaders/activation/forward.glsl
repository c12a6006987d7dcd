// Body of activation/forward.comp (storage buffers, one float per step: any device, any
// offset) and forward_texel.comp (x fetched four floats at a time from an RGBA32F texel
// buffer, about 5x faster than storage loads on lavapipe): y = f(x), elementwise.
#include "activation/activation.glsl"

layout(local_size_x_id = 0) in;

layout(push_constant) uniform Push {
  uint n;       // elements
  float param;  // LeakyRelu slope, Elu alpha
  // Element offsets inside the bindings (x_skip a multiple of 4 in the texel variant).
  uint x_skip, y_skip;
} p;

#if EW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer x_tex;  // RGBA32F over (n)
#else
layout(set = 0, binding = 0) readonly buffer X { float x[]; };  // (n)
#endif
// May be x itself: every step reads x before it writes the same elements of y.
layout(set = 0, binding = 1) writeonly buffer Y { float y[]; };  // (n)

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#if EW_TEXEL
  // Grid-stride over texels (the host caps the workgroup count); the condition is also the
  // bounds guard for the grid rounded up to whole workgroups.
  for (uint t = gl_GlobalInvocationID.x; t < (p.n + 3) / 4; t += stride) {
    const vec4 v = texelFetch(x_tex, int(p.x_skip / 4 + t));
    vec4 r;
    for (uint c = 0; c < 4; ++c) r[c] = activate(v[c], p.param);
    const uint e = 4 * t, at = p.y_skip + e;
    if (e + 4 <= p.n) {
      y[at] = r.x, y[at + 1] = r.y, y[at + 2] = r.z, y[at + 3] = r.w;
    } else {
      for (uint c = 0; c < 4; ++c)  // bounds guard: the last texel reaches past n
        if (e + c < p.n) y[at + c] = r[c];
    }
  }
#else
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride)
    y[p.y_skip + i] = activate(x[p.x_skip + i], p.param);
#endif
}
