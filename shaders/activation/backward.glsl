// Body of activation/backward.comp (storage buffers, one float per step: any device, any
// offset) and backward_texel.comp (inputs fetched four floats at a time from RGBA32F texel
// buffers, dx stored 16 bytes at a time): dx (= or +=) f'(x) * dy, reading x or y, whichever the kind needs
// (kGradReadsX in activation.glsl; the other binding is a placeholder, never read).
#include "activation/activation.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 2) const bool ACCUMULATE = false;

layout(push_constant) uniform Push {
  uint n;       // elements
  float param;  // LeakyRelu slope, Elu alpha
  // Element offsets inside the bindings (multiples of 4 for the texel fetches).
  uint x_skip, y_skip, dy_skip, dx_skip;
} p;

#if EW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer x_tex;    // RGBA32F over (n)
layout(set = 0, binding = 1) uniform samplerBuffer y_tex;    // RGBA32F over (n)
layout(set = 0, binding = 2) uniform samplerBuffer dy_tex;   // RGBA32F over (n)
layout(set = 0, binding = 3) uniform samplerBuffer acc_tex;  // dx itself; read if ACCUMULATE
layout(set = 0, binding = 4) writeonly buffer DX { float dx[]; };
#else
FLOATS(0, x, readonly)
FLOATS(1, y, readonly)
FLOATS(2, dy, readonly)
FLOATS(3, dx, )  // not writeonly: ACCUMULATE reads it
#endif
// dx may be one of the inputs: every step reads before it writes the same elements.

#if EW_TEXEL
layout(set = 0, binding = 4) writeonly buffer DX4 { vec4 dx4[]; };  // dx, 16 bytes a step
#include "common/texel_store.glsl"

vec4 resultTexel(uint t) {
  const vec4 xv = kGradReadsX ? texelFetch(x_tex, int(p.x_skip / 4 + t)) : vec4(0.0);
  const vec4 yv = kGradReadsY ? texelFetch(y_tex, int(p.y_skip / 4 + t)) : vec4(0.0);
  const vec4 g = texelFetch(dy_tex, int(p.dy_skip / 4 + t));
  vec4 d;
  for (uint c = 0; c < 4; ++c) d[c] = activationGrad(xv[c], yv[c], g[c], p.param);
  if (ACCUMULATE) d += texelFetch(acc_tex, int(p.dx_skip / 4 + t));
  return d;
}
#endif

void main() {
#if EW_TEXEL
  STORE_TEXELS(p.n, p.dx_skip, dx, dx4, resultTexel)
#else
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float xv = kGradReadsX ? LOAD(x, p.x_skip + i) : 0.0;
    const float yv = kGradReadsY ? LOAD(y, p.y_skip + i) : 0.0;
    float d = activationGrad(xv, yv, LOAD(dy, p.dy_skip + i), p.param);
    if (ACCUMULATE) d += LOAD(dx, p.dx_skip + i);
    STORE(dx, p.dx_skip + i, d);
  }
#endif
}
