#version 450
// dw[e, h] (= or +=) sum over f in head h, in increasing f, of dy[destinations[e], f]
// x[sources[e], f] (ops/spmm.h): one invocation per (edge, head), a sequential dot product,
// so the same bits every run without atomics. x, dy and dw in any float format; the dot
// product is f32.
#extension GL_GOOGLE_include_directive : require
#include "common/storage.glsl"
#include "common/storage_or_texels.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kAccumulate = false;

// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads the edge
// lists through texel views.
UINTS_OR_TEXELS(0, sources)       // (E)
UINTS_OR_TEXELS(1, destinations)  // (E)
FLOATS(2, x, readonly)   // (N, cols)
FLOATS(3, dy, readonly)  // (N, cols)
FLOATS(4, dw, )          // (E, heads); read to accumulate
layout(push_constant) uniform Push {
  uint edges, cols, head_cols, heads;
  uint sources_skip, destinations_skip, x_skip, dy_skip, dw_skip;
} p;

void main() {
  const uint n = p.edges * p.heads;
  for (uint i = gl_GlobalInvocationID.x; i < n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint e = i / p.heads, h = i - e * p.heads;
    const uint xs =
        p.x_skip + LOAD_OR_FETCH_UINT(sources, p.sources_skip + e) * p.cols + h * p.head_cols;
    const uint ds = p.dy_skip +
                    LOAD_OR_FETCH_UINT(destinations, p.destinations_skip + e) * p.cols +
                    h * p.head_cols;
    float sum = 0.0;
    for (uint f = 0; f < p.head_cols; ++f) sum += LOAD(dy, ds + f) * LOAD(x, xs + f);
    if (kAccumulate) sum += LOAD(dw, p.dw_skip + i);
    STORE(dw, p.dw_skip + i, sum);
  }
}
