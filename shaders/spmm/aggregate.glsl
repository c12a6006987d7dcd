// The body of spmm/aggregate (one feature per invocation, every float tensor in any format
// through common/storage.glsl) and spmm/aggregate4 (a vec4 of f32 features per invocation),
// which define SPMM_WIDTH as 1 or 4 first:
// y[j, f] (= or +=) sum over the edges k of row j, in increasing k, of w[e, h(f)] x[nodes[e], f]
// (ops/spmm.h). The forward reads e = k and nodes = sources; the transposed pass (the
// gradient of x) reads nodes = t_destinations in the same order as k, and, only when
// weighted, e = edge_ids[k] (t_edges) for the weight.
// Consecutive invocations take consecutive features of a row, so a subgroup gathers
// contiguous x rows; each element is one sequential sum, the same bits every run without
// atomics. A node with thousands of edges is a long loop in its own lanes only. The sum is
// f32 whatever x, w and y are stored in; only the store to y rounds.
#ifndef VKGRAD_SPMM_AGGREGATE_GLSL
#define VKGRAD_SPMM_AGGREGATE_GLSL

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const bool kIndirect = false;  // edges through edge_ids (transpose)
layout(constant_id = 2) const bool kWeighted = false;  // false: every weight is 1
layout(constant_id = 3) const bool kAccumulate = false;

// The includer declares the index arrays, bindings 0 to 2 (UINTS_OR_TEXELS: texel views in
// its ".sb4" build, for a device that binds at most 4 storage buffers per stage):
//   offsets (rows + 1), nodes (E), edge_ids (E).
// Without kIndirect, edge_ids is unread (bound to nodes); without kWeighted, w is (bound to x).
#if SPMM_WIDTH == 4
#define VEC vec4
layout(set = 0, binding = 3) readonly buffer Weights { float w[]; };  // (E, heads)
layout(set = 0, binding = 4) readonly buffer X { vec4 x[]; };         // (rows, cols / 4)
layout(set = 0, binding = 5) buffer Y { vec4 y[]; };  // (rows, cols / 4); read to accumulate
#define LOAD_W(i) w[i]
#define LOAD_X(i) x[i]
#define LOAD_Y(i) y[i]
#define STORE_Y(i, v) y[i] = (v)
#else
#define VEC float
FLOATS(3, w, readonly)  // (E, heads)
FLOATS(4, x, readonly)  // (rows, cols)
FLOATS(5, y, )          // (rows, cols); read to accumulate
#define LOAD_W(i) LOAD(w, i)
#define LOAD_X(i) LOAD(x, i)
#define LOAD_Y(i) LOAD(y, i)
#define STORE_Y(i, v) STORE(y, i, v)
#endif
const uint WIDTH = SPMM_WIDTH;
// x_skip and y_skip are in elements, multiples of WIDTH (ops/spmm.cpp); cols and head_cols too.
layout(push_constant) uniform Push {
  uint rows, cols, head_cols, heads;
  uint offsets_skip, nodes_skip, edge_ids_skip, w_skip, x_skip, y_skip;
} p;

void main() {
  const uint vcols = p.cols / WIDTH, x_skip = p.x_skip / WIDTH, y_skip = p.y_skip / WIDTH;
  const uint n = p.rows * vcols;  // < 2^31 (ops/spmm.cpp)
  for (uint i = gl_GlobalInvocationID.x; i < n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const uint j = i / vcols, c = i - j * vcols;
    const uint h = c * WIDTH / p.head_cols;  // one head for all WIDTH features
    const uint begin = LOAD_OR_FETCH_UINT(offsets, p.offsets_skip + j),
               end = LOAD_OR_FETCH_UINT(offsets, p.offsets_skip + j + 1);
    VEC sum = VEC(0.0);
    for (uint k = begin; k < end; ++k) {
      const VEC v = LOAD_X(x_skip + LOAD_OR_FETCH_UINT(nodes, p.nodes_skip + k) * vcols + c);
      if (kWeighted) {
        const uint e = kIndirect ? LOAD_OR_FETCH_UINT(edge_ids, p.edge_ids_skip + k) : k;
        sum += LOAD_W(p.w_skip + e * p.heads + h) * v;
      } else {
        sum += v;
      }
    }
    if (kAccumulate) sum += LOAD_Y(y_skip + i);
    STORE_Y(y_skip + i, sum);
  }
}

#endif
