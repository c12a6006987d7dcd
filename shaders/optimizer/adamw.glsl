// Body of optimizer/adamw.comp (storage buffers, one float per step: any device),
// optimizer/adamw_texel.comp (param, grad, m and v fetched four floats at a time from RGBA32F
// texel buffers, param, m and v stored 16 bytes at a time: on lavapipe both are several
// times cheaper than scalar storage loads and stores) and optimizer/adamw_many.comp (the texel
// kernel over many tensors at once: each binding spans them all, and a segment table says
// where each tensor lies and which workgroups update it).
//
// AdamW (Loshchilov & Hutter), in place, PyTorch's order: decoupled weight decay first,
// then the bias-corrected Adam step with eps outside the square root:
//   p *= 1 - lr * wd
//   m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g^2
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// lr, b1, b2, the bias corrections 1 - b^t and the clip factor g is scaled by come from
// the optimizer state buffer.
layout(local_size_x_id = 0) in;

#if ADAMW_MANY
layout(push_constant) uniform Push {
  uint count;  // tensors in the segment table
  float eps;
  uint at;  // the table's first word in its binding
} p;
// One segment per tensor, 8 words each (ops/optimizer.cpp writes it when recording): the tensor's
// first element inside each binding (multiples of 4), its size, its weight decay, and the
// run of workgroups that updates it.
layout(set = 0, binding = 8) readonly buffer Table { uint table[]; };
#else
layout(push_constant) uniform Push {
  uint n;
  float eps, weight_decay;
  // Texel variant: first elements inside the bindings, multiples of 4 (the storage variant
  // binds every view at its own offset).
  uint p_skip, g_skip, m_skip, v_skip;
} p;
#endif

#if ADAMW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer param_tex;  // RGBA32F over (n): reads
layout(set = 0, binding = 1) uniform samplerBuffer grad_tex;
layout(set = 0, binding = 2) uniform samplerBuffer m_tex;
layout(set = 0, binding = 3) uniform samplerBuffer v_tex;
layout(set = 0, binding = 5) writeonly buffer Param { float param[]; };  // the same memory,
layout(set = 0, binding = 5) writeonly buffer Param4 { vec4 param4[]; };  // written
layout(set = 0, binding = 6) writeonly buffer M { float m1[]; };
layout(set = 0, binding = 6) writeonly buffer M4 { vec4 m14[]; };
layout(set = 0, binding = 7) writeonly buffer V { float m2[]; };
layout(set = 0, binding = 7) writeonly buffer V4 { vec4 m24[]; };
#elif ADAMW_SPLIT
// A device that binds at most 4 storage buffers per stage: param, grad, m, v and the state are
// 5, so the update takes two dispatches of 4 each: PASS 0 updates m and v from grad, PASS 1
// param from m and v. The moments are f32, so PASS 1 reads back exactly what PASS 0 computed,
// and the result is the bits of the one-pass kernel.
layout(constant_id = 1) const uint PASS = 0;
// PASS 0: grad (only read); PASS 1: param. Not readonly: PASS 1 writes it.
layout(set = 0, binding = 0) buffer First { float first[]; };  // (n)
layout(set = 0, binding = 1) buffer M { float m1[]; };          // (n) first moment
layout(set = 0, binding = 2) buffer V { float m2[]; };          // (n) second moment
#define STATE_BINDING 3  // bindings are numbered without gaps
#else
layout(set = 0, binding = 0) buffer Param { float param[]; };       // (n)
layout(set = 0, binding = 1) readonly buffer Grad { float grad[]; };  // (n)
layout(set = 0, binding = 2) buffer M { float m1[]; };                // (n) first moment
layout(set = 0, binding = 3) buffer V { float m2[]; };                // (n) second moment
#endif
#ifndef STATE_BINDING
#define STATE_BINDING 4
#endif
layout(set = 0, binding = STATE_BINDING) readonly buffer State {
  float lr;
  uint step;
  float beta1, beta2, bias1, bias2;
  float grad_scale;  // the clip factor, 1 without clipping (ops/optimizer.h)
  uint skip;         // nonzero: this step changes nothing (an fp16 step that overflowed)
} state;

// One update of w, m, v from g: floats or vec4s, elementwise; the moments first, then the
// weight from them (ADAMW_SPLIT runs the two halves in two dispatches).
#define ADAMW_MOMENTS(G, M, V)       \
  M = b1 * M + (1.0 - b1) * G;       \
  V = b2 * V + (1.0 - b2) * (G * G);
#define ADAMW_WEIGHT(W, M, V) W = W * decay - lr * (M / bias1) / (sqrt(V / bias2) + p.eps);
#define ADAMW(W, G, M, V) \
  ADAMW_MOMENTS(G, M, V)  \
  ADAMW_WEIGHT(W, M, V)

#if ADAMW_TEXEL
// Invocation `first` and every `stride`-th after it update whole texels of one tensor in a
// branch-free loop; invocation 0 then the partial last texel (common/texel_store.glsl says
// why). Each invocation reads its texel of param, m and v before it writes them.
void updateTexels(uint first, uint stride, uint n, uint p_skip, uint g_skip, uint m_skip,
                  uint v_skip, float weight_decay) {
  const float lr = state.lr, b1 = state.beta1, b2 = state.beta2;
  // Before the first advanceStep the corrections are 1 - b^0 = 0; act as step 1 rather
  // than divide by zero.
  const float bias1 = state.bias1 > 0.0 ? state.bias1 : 1.0 - b1;
  const float bias2 = state.bias2 > 0.0 ? state.bias2 : 1.0 - b2;
  const float decay = 1.0 - lr * weight_decay, scale = state.grad_scale;
  for (uint t = first; t < n / 4; t += stride) {
    vec4 w = texelFetch(param_tex, int(p_skip / 4 + t));
    const vec4 g = texelFetch(grad_tex, int(g_skip / 4 + t)) * scale;
    vec4 m = texelFetch(m_tex, int(m_skip / 4 + t)), v = texelFetch(v_tex, int(v_skip / 4 + t));
    ADAMW(w, g, m, v)
    param4[p_skip / 4 + t] = w;
    m14[m_skip / 4 + t] = m;
    m24[v_skip / 4 + t] = v;
  }
  if (first == 0 && n % 4 != 0) {
    const uint t = n / 4;
    vec4 w = texelFetch(param_tex, int(p_skip / 4 + t));
    const vec4 g = texelFetch(grad_tex, int(g_skip / 4 + t)) * scale;
    vec4 m = texelFetch(m_tex, int(m_skip / 4 + t)), v = texelFetch(v_tex, int(v_skip / 4 + t));
    ADAMW(w, g, m, v)
    for (uint c = 0; c < n % 4; ++c) {
      param[p_skip + 4 * t + c] = w[c];
      m1[m_skip + 4 * t + c] = m[c];
      m2[v_skip + 4 * t + c] = v[c];
    }
  }
}
#endif

void main() {
  // The same for every invocation: the whole dispatch returns, before any write.
  if (state.skip != 0u) return;
#if ADAMW_MANY
  // The segment whose run of workgroups holds this one: the last with first_group <= it
  // (the same for the whole workgroup).
  const uint group = gl_WorkGroupID.x;
  uint lo = 0, hi = p.count - 1;
  while (lo < hi) {
    const uint mid = (lo + hi + 1) / 2;
    if (table[p.at + 8 * mid + 6] <= group) lo = mid; else hi = mid - 1;
  }
  const uint s = p.at + 8 * lo;
  const uint first = (group - table[s + 6]) * gl_WorkGroupSize.x + gl_LocalInvocationID.x;
  updateTexels(first, table[s + 7] * gl_WorkGroupSize.x, table[s + 4], table[s], table[s + 1],
               table[s + 2], table[s + 3], uintBitsToFloat(table[s + 5]));
#elif ADAMW_TEXEL
  updateTexels(gl_GlobalInvocationID.x, gl_NumWorkGroups.x * gl_WorkGroupSize.x, p.n, p.p_skip,
               p.g_skip, p.m_skip, p.v_skip, p.weight_decay);
#else
  const float lr = state.lr, b1 = state.beta1, b2 = state.beta2;
  const float bias1 = state.bias1 > 0.0 ? state.bias1 : 1.0 - b1;
  const float bias2 = state.bias2 > 0.0 ? state.bias2 : 1.0 - b2;
  const float decay = 1.0 - lr * p.weight_decay, scale = state.grad_scale;
#if ADAMW_SPLIT
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    float m = m1[i], v = m2[i];
    if (PASS == 0) {
      const float g = first[i] * scale;
      ADAMW_MOMENTS(g, m, v)
      m1[i] = m;
      m2[i] = v;
    } else {
      float w = first[i];
      ADAMW_WEIGHT(w, m, v)
      first[i] = w;
    }
  }
#else
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    float w = param[i], m = m1[i], v = m2[i];
    const float g = grad[i] * scale;
    ADAMW(w, g, m, v)
    m1[i] = m;
    m2[i] = v;
    param[i] = w;
  }
#endif
#endif
}
