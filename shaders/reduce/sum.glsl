// Body of reduce/sum.comp (storage buffers, one element per load: any device, any offset, x, y
// and out in any float format) and sum_texel.comp (texel buffers: RGBA32F fetches of 4 floats when VEC4, else R32F; about 5x
// faster than storage loads on lavapipe). x is folded to (outer, kept, inner):
//   out[m] (= or +=) alpha * sum over o < outer, k < inner of x[o][m][k] (* y[o][m][k])
// Lavapipe stops every invocation after 65535 loop iterations in all (llvmpipe's
// LP_MAX_TGSI_LOOP_ITERATIONS, shared by every loop of a shader), so on CPU devices the host
// gives each output enough LANES (and a workgroup of up to 1024) that no lane loops longer.
//
// The sums are f32 whatever the tensors are stored in; only the store of out rounds.
// In a fixed order for a given shape, so the same input gives the same bits: each of LANES
// invocations sums a fixed strided share in sequence, compensated (Kahan), so that a long run
// in one lane costs no accuracy; then a fixed shared-memory tree adds the LANES partials.
// No atomics.

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint LANES = 1;  // invocations per output, a power of 2
// false: the lanes of an output split each run of inner (contiguous) elements, row by row.
// true (inner == 1): the lanes split outer, and adjacent invocations take adjacent outputs,
// which are adjacent in memory (column sums of a row-major matrix).
layout(constant_id = 2) const bool COLUMN = false;
layout(constant_id = 3) const bool PRODUCT = false;  // sum x * y instead of x
layout(constant_id = 4) const bool ACCUMULATE = false;
// Texel variant only: one RGBA32F fetch covers 4 consecutive elements of the contiguous axis
// (inner, or kept in COLUMN mode), which is then counted in texels.
layout(constant_id = 5) const bool VEC4 = false;

layout(push_constant) uniform Push {
  uint outer, kept, inner;  // the fold, in fetched units (texels on the VEC4 axis)
  float alpha;
  uint x_skip, y_skip;      // offsets inside the bindings, in fetched units
  uint out_skip;            // in elements
} p;

#if EW_TEXEL
layout(set = 0, binding = 0) uniform samplerBuffer x_tex;  // (outer, kept, inner)
layout(set = 0, binding = 1) uniform samplerBuffer y_tex;  // like x; a placeholder unless PRODUCT
layout(set = 0, binding = 2) buffer Out { float result[]; };  // (kept); not writeonly: ACCUMULATE
#define LOAD_RESULT(I) result[I]
#define STORE_RESULT(I, V) result[I] = (V)
#else
FLOATS(0, x, readonly)  // (outer, kept, inner)
FLOATS(1, y, readonly)  // like x; a placeholder unless PRODUCT
FLOATS(2, result, )     // (kept); not writeonly: ACCUMULATE
#define LOAD_RESULT(I) LOAD(result, I)
#define STORE_RESULT(I, V) STORE(result, I, V)
#endif

const uint kOuts = gl_WorkGroupSize.x / LANES;  // outputs per workgroup and block
shared vec4 partial[gl_WorkGroupSize.x];

// The term at unit index `at`; scalar terms in .x.
vec4 term(uint at) {
#if EW_TEXEL
  if (VEC4) {
    vec4 v = texelFetch(x_tex, int(p.x_skip + at));
    if (PRODUCT) v *= texelFetch(y_tex, int(p.y_skip + at));
    return v;
  }
  float v = texelFetch(x_tex, int(p.x_skip + at)).r;
  if (PRODUCT) v *= texelFetch(y_tex, int(p.y_skip + at)).r;
#else
  float v = LOAD(x, p.x_skip + at);
  if (PRODUCT) v *= LOAD(y, p.y_skip + at);
#endif
  return vec4(v, 0.0, 0.0, 0.0);
}

// acc += v, compensated (Kahan): comp carries the low-order bits each addition loses.
// precise keeps the compiler from simplifying (t - acc) - y to zero.
void kahanAdd(inout vec4 acc, inout vec4 comp, vec4 v) {
  precise const vec4 y = v - comp;
  precise const vec4 t = acc + y;
  precise const vec4 lost = (t - acc) - y;
  comp = lost;
  acc = t;
}

void main() {
  const bool vec4_units = EW_TEXEL != 0 && VEC4;
  const uint idx = gl_LocalInvocationIndex;
  const uint g = COLUMN ? idx % kOuts : idx / LANES;     // which output of the block
  const uint lane = COLUMN ? idx / kOuts : idx % LANES;  // which share of it
  const uint slot = g * LANES + lane;                    // the tree works on g's LANES slots
  const uint blocks = (p.kept + kOuts - 1) / kOuts;
  // Grid-stride over blocks of kOuts outputs. The bound is uniform across the workgroup, so
  // the barriers inside are in uniform control flow.
  for (uint block = gl_WorkGroupID.x; block < blocks; block += gl_NumWorkGroups.x) {
    const uint m = block * kOuts + g;
    vec4 acc = vec4(0.0), comp = vec4(0.0);
    // Bounds guard: the last block may be partial. Its idle invocations still add zeros into
    // the tree and join every barrier below.
    if (m < p.kept) {
      if (COLUMN) {
        for (uint o = lane; o < p.outer; o += LANES) kahanAdd(acc, comp, term(o * p.kept + m));
      } else if (p.outer == 1) {
        const uint row = m * p.inner;
        for (uint k = lane; k < p.inner; k += LANES) kahanAdd(acc, comp, term(row + k));
      } else {
        // The lanes split the (outer, inner) pairs as one flat range, so that no lane's loop
        // runs longer than outer * inner / LANES (see the host's loop budget).
        for (uint t = lane; t < p.outer * p.inner; t += LANES) {
          const uint o = t / p.inner, k = t - o * p.inner;
          kahanAdd(acc, comp, term((o * p.kept + m) * p.inner + k));
        }
      }
    }
    acc -= comp;  // t - comp is the compensated sum
    if (LANES > 1) {
      partial[slot] = acc;
      for (uint s = LANES / 2; s > 0; s /= 2) {
        barrier();  // the partials written in the previous step (or just above) are visible
        if (lane < s) partial[slot] += partial[slot + s];
      }
      acc = partial[slot];  // lane 0 reads its own last write: the total
    }
    if (m < p.kept && lane == 0) {  // bounds guard as above; one writer per output
      if (vec4_units && COLUMN) {
        for (uint c = 0; c < 4; ++c) {  // four adjacent outputs per texel
          const uint at = p.out_skip + 4 * m + c;
          STORE_RESULT(at, p.alpha * acc[c] + (ACCUMULATE ? LOAD_RESULT(at) : 0.0));
        }
      } else {
        const float total = vec4_units ? (acc.x + acc.y) + (acc.z + acc.w) : acc.x;
        const uint at = p.out_skip + m;
        STORE_RESULT(at, p.alpha * total + (ACCUMULATE ? LOAD_RESULT(at) : 0.0));
      }
    }
    // Every lane has read its partner's slot (in the last tree step) before the next block
    // overwrites the slots.
    if (LANES > 1) barrier();
  }
}
