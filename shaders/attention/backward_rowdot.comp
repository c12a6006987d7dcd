#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward, first pass: rowdot_i = dO_i · O_i for every (batch, head, query
// row), the sum_j P_ij dP_ij the score gradients need. One invocation per row.
#include "attention/common.glsl"

layout(set = 0, binding = 0) readonly buffer Ob { float o[]; };
layout(set = 0, binding = 1) readonly buffer DOb { float dout[]; };
layout(set = 0, binding = 2) writeonly buffer Rb { float rowdot[]; };

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, i = gl_GlobalInvocationID.x;
  if (i >= p.Tq) return;
  const uint oi = at(O, b, i, p.Tq, h), di = at(DO, b, i, p.Tq, h);
  float sum = 0.0;
  for (uint d = 0; d < D; ++d) sum += o[oi + d] * dout[di + d];
  rowdot[p.rowdot_skip + rowIndex(b, h, i)] = sum;
}
