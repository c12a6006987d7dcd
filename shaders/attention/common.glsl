// Shared by the attention kernels: the push constants, the tensor layout and the mask.
//
// Q, O, dO and dQ are (B, Tq, H, D) and K, V, dK, dV (B, Tk, Hkv, D), H = group * Hkv: query
// head h reads key/value head h / group (grouped-query attention; group 1 is plain multi-head
// attention). D contiguous, heads D apart, tokens stride[slot] apart (H*D when packed; more inside a fused QKV projection),
// starting skip[slot] elements into their binding. LSE and the backward's row dots are
// (B, H, Tq), contiguous. Query i sees key j when !causal or j <= i + (Tk - Tq).

layout(constant_id = 0) const uint D = 64;     // head dim
layout(constant_id = 1) const uint TILE = 32;  // rows of a tile = invocations per workgroup

layout(local_size_x_id = 1) in;

// Tensor slots of skip[] and stride[].
const uint Q = 0, K = 1, V = 2, O = 3, DO = 4, DQ = 5, DK = 6, DV = 7;

layout(push_constant) uniform Push {
  uint B, H, Tq, Tk;
  float scale;      // multiplies q·k
  uint causal;      // 1: the mask above
  uint accumulate;  // backward: 1 adds to dQ, dK, dV instead of overwriting
  uint lse_skip, rowdot_skip;
  uint skip[8], stride[8];
  uint group;  // query heads per key/value head, H / Hkv
} p;

// Element d of row t of head h, batch b, of the tensor in `slot`.
uint at(uint slot, uint b, uint t, uint T, uint h) {
  return p.skip[slot] + (b * T + t) * p.stride[slot] + h * D;
}

// The key/value head query head h reads.
uint kvHead(uint h) { return h / p.group; }

// Index of (b, h, i) in LSE and the row dots, before their skip.
uint rowIndex(uint b, uint h, uint i) { return (b * p.H + h) * p.Tq + i; }

// The last key query i sees, plus one (0 when it sees none).
uint keyEnd(uint i) {
  if (p.causal == 0) return p.Tk;
  const int end = int(i) + int(p.Tk) - int(p.Tq) + 1;
  return uint(clamp(end, 0, int(p.Tk)));
}

// The first query that sees key j.
uint queryBegin(uint j) {
  if (p.causal == 0) return 0;
  return uint(clamp(int(j) - int(p.Tk) + int(p.Tq), 0, int(p.Tq)));
}

#define NEG_INF uintBitsToFloat(0xff800000u)
