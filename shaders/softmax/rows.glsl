// Shared by the row-wise kernels of softmax, log_softmax and cross_entropy (forward and
// backward): the layouts a row can take, chosen per device and shape by the host
// (ops/softmax.cpp, softmaxLayout), and a reduction over one row that works in each.
//
//  kRowPerInvocation true: one invocation per row, for short rows, where a workgroup per
//         7-element row would leave most lanes idle and pay a reduction per handful of values.
//  kRowPerInvocation false: one workgroup per row, grid-striding over rows when there are
//         more rows than workgroups; each lane takes a strided slice of the row and the
//         workgroup combines the lanes' partials (common/reduce.glsl).
//  kOneSubgroup: the workgroup is one subgroup (see common/reduce.glsl): no barriers.
//  kTexelInput: inputs are fetched through R32F texel buffers rather than storage buffers;
//         on lavapipe texel fetches are branch-free gathers while storage loads are
//         scalarised per lane with bounds checks (~3x slower). The host binds each input
//         both ways, the unused one to a valid one-element dummy.
//
// The includer enables GL_KHR_shader_subgroup_arithmetic and defines
//   void processRow(uint row, uint first, uint step)
// which handles elements first, first + step, ... of its row and calls the row* reductions
// below from uniform control flow (the workgroup layout has barriers inside them).
#ifndef VKGRAD_SOFTMAX_ROWS_GLSL
#define VKGRAD_SOFTMAX_ROWS_GLSL

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kRowPerInvocation = false;
layout(constant_id = 2) const bool kOneSubgroup = false;
layout(constant_id = 3) const bool kTexelInput = false;

#include "common/reduce.glsl"

// A lane already holds its whole row when it owns the row.
float rowSum(float v) { return kRowPerInvocation ? v : workgroupSum(v); }
float rowMax(float v) { return kRowPerInvocation ? v : workgroupMax(v); }
MaxSum rowMaxSum(MaxSum v) { return kRowPerInvocation ? v : workgroupMaxSum(v); }

void processRow(uint row, uint first, uint step);

void forEachRow(uint rows) {
  if (kRowPerInvocation) {
    const uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
    // row < rows: the grid is rounded up to whole workgroups (no barriers on this path).
    for (uint row = gl_GlobalInvocationID.x; row < rows; row += stride) processRow(row, 0, 1);
  } else {
    // The row loop is the same for the whole workgroup, so the barriers inside the
    // reductions stay in uniform control flow.
    for (uint row = gl_WorkGroupID.x; row < rows; row += gl_NumWorkGroups.x)
      processRow(row, gl_LocalInvocationID.x, gl_WorkGroupSize.x);
  }
}

#endif
