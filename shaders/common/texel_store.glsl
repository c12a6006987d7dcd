// The loop of an elementwise texel kernel with one output. On lavapipe a branch inside the
// loop (the bounds guard of the last, partial texel) halves the rate of the whole loop, and
// one 16-byte store is about twice as fast as four 4-byte ones (BENCHMARKS.md, copy). So:
// every whole texel of the N elements in a branch-free grid-stride loop, with one vec4 store
// into OUT4 (the output binding declared a second time, as vec4[]; the host guarantees
// SKIP % 4 == 0), then the partial last texel, if any, by invocation 0 with scalar stores
// into OUT. VALUE(t) is the kernel's function giving the vec4 result of texel t.
#define STORE_TEXELS(N, SKIP, OUT, OUT4, VALUE)                                       \
  for (uint t_ = gl_GlobalInvocationID.x; t_ < (N) / 4;                               \
       t_ += gl_NumWorkGroups.x * gl_WorkGroupSize.x)                                 \
    OUT4[(SKIP) / 4 + t_] = VALUE(t_);                                                \
  if (gl_GlobalInvocationID.x == 0 && (N) % 4 != 0) {                                 \
    const vec4 last_ = VALUE((N) / 4);                                                \
    for (uint c_ = 0; c_ < (N) % 4; ++c_) OUT[(SKIP) + (N) / 4 * 4 + c_] = last_[c_]; \
  }
