// Shared by the pool2d kernels (ops/pool2d.h): the push constants and the window arithmetic.
// Planes are (n, c) pairs: every kernel works within one H x W plane at a time.

layout(push_constant) uniform Push {
  uint n;  // elements the dispatch covers
  uint height, width, out_h, out_w;
  uint kernel_h, kernel_w, stride_h, stride_w, pad_h, pad_w;
  uint skip_a, skip_b, skip_c;  // first elements inside the bindings (ops/binding.h)
} p;

// The output rows whose windows hold input row i along an axis: [first, last], empty when
// first > last. Window o covers [o·s - pad, o·s - pad + k).
void windowsOver(uint i, uint k, uint s, uint pad, uint outs, out uint first, out uint last) {
  const int top = int(i + pad);                       // i in padded coordinates
  const int lo = top - int(k) + 1;                    // o·s >= lo
  first = lo <= 0 ? 0u : (uint(lo) + s - 1u) / s;
  last = min(uint(top) / s, outs - 1u);
}
