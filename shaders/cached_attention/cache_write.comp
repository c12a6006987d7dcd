#version 450
#extension GL_GOOGLE_include_directive : require
// Appends R new rows of keys and values to a key/value cache: cache row position + r of batch
// b = row r of the new k and v (B, R, H, D; tokens k_stride and v_stride elements apart, as
// read out of a fused QKV projection). position comes from a device buffer, so one recorded
// dispatch serves every step of a decode. A row past the cache's `rows` is not written (the
// host keeps position + R <= rows). One invocation per element, grid-stride.
#include "common/storage.glsl"

layout(local_size_x_id = 0) in;

FLOATS(0, k, readonly)
FLOATS(1, v, readonly)
FLOATS(2, k_cache, writeonly)
FLOATS(3, v_cache, writeonly)
#ifdef FOUR_STORAGE_BUFFERS
// The ".sb4" build (a device that binds at most 4 storage buffers per stage) reads the
// position word through an R32UI texel view, which counts against the sampled-image limit;
// the float tensors stay storage buffers.
layout(set = 0, binding = 4) uniform usamplerBuffer position_texels;
#define POSITION(I) texelFetch(position_texels, int(I)).x
#else
layout(set = 0, binding = 4) readonly buffer Position { uint position[]; };
#define POSITION(I) position[I]
#endif

layout(push_constant) uniform Push {
  uint B, R, rows, HD;  // HD = H * D, a cache row
  uint k_stride, v_stride;
  uint skip[5];  // k, v, k_cache, v_cache, position
} p;

void main() {
  const uint total = p.B * p.R * p.HD, step = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
  const uint start = POSITION(p.skip[4]);
  for (uint i = gl_GlobalInvocationID.x; i < total; i += step) {
    const uint e = i % p.HD, br = i / p.HD, r = br % p.R, b = br / p.R;
    const uint t = start + r;
    if (t >= p.rows) continue;
    const uint to = (b * p.rows + t) * p.HD + e;
    STORE(k_cache, p.skip[2] + to, LOAD(k, p.skip[0] + br * p.k_stride + e));
    STORE(v_cache, p.skip[3] + to, LOAD(v, p.skip[1] + br * p.v_stride + e));
  }
}
