#version 450
#extension GL_GOOGLE_include_directive : require
// Flash attention backward, first pass: rowdot_i = dO_i · O_i for every (batch, head, query
// row), the sum_j P_ij dP_ij the score gradients need. One invocation per row; O, dO and the
// row dots in any float format, the sum in f32.
#include "common/storage.glsl"
#include "attention/common.glsl"

FLOATS(0, o, readonly)
FLOATS(1, dout, readonly)
FLOATS(2, rowdot, writeonly)

void main() {
  const uint b = gl_WorkGroupID.z, h = gl_WorkGroupID.y, i = gl_GlobalInvocationID.x;
  if (i >= p.Tq) return;
  const uint oi = at(O, b, i, p.Tq, h), di = at(DO, b, i, p.Tq, h);
  float sum = 0.0;
  for (uint d = 0; d < D; ++d) sum += LOAD(o, oi + d) * LOAD(dout, di + d);
  STORE(rowdot, p.rowdot_skip + rowIndex(b, h, i), sum);
}
