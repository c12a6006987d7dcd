#version 450
// y[j, f] (= or +=) sum over the edges k of row j, in increasing k, of w[e, h(f)] x[nodes[e], f]
// (ops/spmm.h). The forward reads e = k and nodes = sources; the transposed pass (the
// gradient of x) reads e = edge_ids[k] (t_edges) and nodes = destinations.
// One invocation per output element (j, f), consecutive invocations on consecutive features
// of a row: a subgroup gathers contiguous x rows, and each element is one sequential sum,
// the same bits every run without atomics. A node with thousands of edges is a long loop in
// its own lanes; the other rows go on in other workgroups.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kIndirect = false;    // edges through edge_ids (transpose)
layout(constant_id = 2) const bool kWeighted = false;    // false: every weight is 1
layout(constant_id = 3) const bool kAccumulate = false;

// Without kIndirect, edge_ids is unread (bound to nodes); without kWeighted, w is (bound to x).
layout(set = 0, binding = 0) readonly buffer Offsets { uint offsets[]; };   // (rows + 1)
layout(set = 0, binding = 1) readonly buffer Nodes { uint nodes[]; };       // (E)
layout(set = 0, binding = 2) readonly buffer EdgeIds { uint edge_ids[]; };  // (E)
layout(set = 0, binding = 3) readonly buffer Weights { float w[]; };        // (E, heads)
layout(set = 0, binding = 4) readonly buffer X { float x[]; };              // (rows, cols)
layout(set = 0, binding = 5) buffer Y { float y[]; };  // (rows, cols); read to accumulate
layout(push_constant) uniform Push {
  uint rows, cols, head_cols, heads;
  uint offsets_skip, nodes_skip, edge_ids_skip, w_skip, x_skip, y_skip;
} p;

void main() {
  const uint n = p.rows * p.cols;  // < 2^31 (ops/spmm.cpp)
  for (uint i = gl_GlobalInvocationID.x; i < n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint j = i / p.cols, f = i - j * p.cols;
    const uint h = f / p.head_cols;
    const uint begin = offsets[p.offsets_skip + j], end = offsets[p.offsets_skip + j + 1];
    float sum = 0.0;
    for (uint k = begin; k < end; ++k) {
      const uint e = kIndirect ? edge_ids[p.edge_ids_skip + k] : k;
      const float v = x[p.x_skip + nodes[p.nodes_skip + e] * p.cols + f];
      sum += kWeighted ? w[p.w_skip + e * p.heads + h] * v : v;
    }
    if (kAccumulate) sum += y[p.y_skip + i];
    y[p.y_skip + i] = sum;
  }
}
