// Shared by the attention kernels for SIMD CPUs (lavapipe), where a workgroup is one
// subgroup and each lane one row (a query, or a key in backward_kv_texel): no shared memory
// and no barriers. The rows every lane needs come through RGBA32F texel buffers (branch-free
// gathers on llvmpipe): lane r fetches row j0 + r, and subgroupShuffle with a constant lane
// index (a register permute; the loops are unrolled) hands it to the others. Needs D, the
// row strides and the starts to be multiples of 4 floats; the host checks.
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : require

#include "attention/common.glsl"

const uint D4 = D / 4;  // vec4s per row

// The backward adds to dQ, dK, dV instead of overwriting them. A spec constant, not the push
// constant the shared-memory kernels read: a storage load is a scalar loop per lane on
// llvmpipe, so only pipelines that accumulate should contain the read.
layout(constant_id = 2) const bool ACCUMULATE = false;
// The outputs' rows (O, or dQ, dK, dV) start on 16 bytes, so each lane stores its row a vec4
// at a time (a scalar storage store is a per-lane loop too; 16-byte stores measured ~2x
// faster per float).
layout(constant_id = 3) const bool STORE4 = false;

// The texel holding element 0 of row t, head h, batch b of the tensor in `slot`.
int texelAt(uint slot, uint b, uint t, uint T, uint h) { return int(at(slot, b, t, T, h) / 4); }
