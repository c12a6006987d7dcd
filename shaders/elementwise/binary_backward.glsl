// Body of elementwise/binary_backward.comp (storage buffers, one element per step, any float
// format; f32 arithmetic) and
// binary_backward_texel.comp (RGBA32F texel inputs, 16-byte stores): both gradients of a
// same-shape binary op in one pass over dout.
//   OP 0 (out = alpha a + beta b): da = alpha dout,   db = beta dout
//   OP 1 (out = alpha a b):        da = alpha dout b, db = alpha dout a
// (A broadcast b's gradient is a reduction: the host uses reduce/sum for it.)

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0;
layout(constant_id = 2) const bool ACCUMULATE_A = false;
layout(constant_id = 3) const bool ACCUMULATE_B = false;

layout(push_constant) uniform Push {
  uint n;             // elements of every operand
  float alpha, beta;  // the forward op's coefficients
  // Element offsets inside the bindings (multiples of 4 in the texel variant).
  uint dout_skip, a_skip, b_skip, da_skip, db_skip;
} p;

#if EW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer dout_tex;  // RGBA32F views, all (n)
layout(set = 0, binding = 1) uniform samplerBuffer a_tex;     // placeholder for OP 0
layout(set = 0, binding = 2) uniform samplerBuffer b_tex;     // placeholder for OP 0
layout(set = 0, binding = 3) uniform samplerBuffer da_tex;    // da itself; read if ACCUMULATE_A
layout(set = 0, binding = 4) uniform samplerBuffer db_tex;    // db itself; read if ACCUMULATE_B
layout(set = 0, binding = 5) writeonly buffer DA { float da[]; };
layout(set = 0, binding = 6) writeonly buffer DB { float db[]; };
#elif EW_ONE_GRADIENT
// The ".sb4" build (a device that binds at most 4 storage buffers per stage): one gradient per
// dispatch, da or db (GRAD_B), into binding 3; the host records the two in an order that no
// output overwrites an input the other still reads.
layout(constant_id = 4) const bool GRAD_B = false;
FLOATS(0, dout, readonly)
FLOATS(1, a, readonly)  // placeholder for OP 0
FLOATS(2, b, readonly)  // placeholder for OP 0
FLOATS(3, grad, )       // da or db; not writeonly: ACCUMULATE_* reads it
#else
FLOATS(0, dout, readonly)
FLOATS(1, a, readonly)  // placeholder for OP 0
FLOATS(2, b, readonly)  // placeholder for OP 0
// Not writeonly: ACCUMULATE_* reads them.
FLOATS(3, da, )
FLOATS(4, db, )
#endif
// da and db may each be one of the inputs (every step reads before it writes the same
// elements), but not each other.

#if EW_TEXEL
// da and db again, 16 bytes a step (their skips are multiples of 4).
layout(set = 0, binding = 5) writeonly buffer DA4 { vec4 da4[]; };
layout(set = 0, binding = 6) writeonly buffer DB4 { vec4 db4[]; };

void gradients(uint t, out vec4 ga, out vec4 gb) {
  const vec4 g = texelFetch(dout_tex, int(p.dout_skip / 4 + t));
  ga = p.alpha * g;
  gb = p.beta * g;
  if (OP == 1) {
    ga = p.alpha * g * texelFetch(b_tex, int(p.b_skip / 4 + t));
    gb = p.alpha * g * texelFetch(a_tex, int(p.a_skip / 4 + t));
  }
  if (ACCUMULATE_A) ga += texelFetch(da_tex, int(p.da_skip / 4 + t));
  if (ACCUMULATE_B) gb += texelFetch(db_tex, int(p.db_skip / 4 + t));
}
#endif

void main() {
  const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
#if EW_TEXEL
  // Whole texels in a branch-free loop, then the partial last one (common/texel_store.glsl
  // says why).
  vec4 ga, gb;
  for (uint t = gl_GlobalInvocationID.x; t < p.n / 4; t += stride) {
    gradients(t, ga, gb);
    da4[p.da_skip / 4 + t] = ga;
    db4[p.db_skip / 4 + t] = gb;
  }
  if (gl_GlobalInvocationID.x == 0 && p.n % 4 != 0) {
    const uint t = p.n / 4;
    gradients(t, ga, gb);
    for (uint c = 0; c < p.n % 4; ++c) {
      da[p.da_skip + 4 * t + c] = ga[c];
      db[p.db_skip + 4 * t + c] = gb[c];
    }
  }
#elif EW_ONE_GRADIENT
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid. The
  // arithmetic of the loop below, for one of the two gradients.
  const uint skip = GRAD_B ? p.db_skip : p.da_skip;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float g = LOAD(dout, p.dout_skip + i);
    float v = GRAD_B ? p.beta * g : p.alpha * g;
    if (OP == 1) v = GRAD_B ? p.alpha * g * LOAD(a, p.a_skip + i) : p.alpha * g * LOAD(b, p.b_skip + i);
    if (GRAD_B ? ACCUMULATE_B : ACCUMULATE_A) v += LOAD(grad, skip + i);
    STORE(grad, skip + i, v);
  }
#else
  // Grid-stride loop; the condition is also the bounds guard for the rounded-up grid.
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += stride) {
    const float g = LOAD(dout, p.dout_skip + i);
    float ga = p.alpha * g, gb = p.beta * g;
    if (OP == 1) {
      ga = p.alpha * g * LOAD(b, p.b_skip + i);
      gb = p.alpha * g * LOAD(a, p.a_skip + i);
    }
    if (ACCUMULATE_A) ga += LOAD(da, p.da_skip + i);
    if (ACCUMULATE_B) gb += LOAD(db, p.db_skip + i);
    STORE(da, p.da_skip + i, ga);
    STORE(db, p.db_skip + i, gb);
  }
#endif
}
