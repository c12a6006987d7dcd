// Shared by the conv2d kernels (ops/conv2d.h): the push constants, one layout for all of
// them, and the scratch layouts. Within a chunk of `images` images, with P = OH·OW output
// pixels per image and K = Cg·KH·KW taps per output:
//   cols (G, images·P, K):  cols[g, n·P + q, (c·KH + ky)·KW + kx] = x[n, g·Cg + c, iy, ix]
//   rows (G, images·P, Og): the product cols·wᵀ, or dy gathered into that layout
// so that a group's rows are one contiguous matrix for the matmul kernels.

layout(push_constant) uniform Push {
  uint n;                     // elements the dispatch covers
  uint images;                // in this chunk
  uint channels, height, width;
  uint outs, out_h, out_w;    // O, OH, OW
  uint kernel_h, kernel_w;
  uint stride_h, stride_w;
  uint pad_top, pad_left;
  uint dilation_h, dilation_w;
  uint groups;
  uint skip_a, skip_b, skip_c, skip_d;  // first elements inside the bindings (ops/binding.h)
} p;

uint groupChannels() { return p.channels / p.groups; }  // Cg
uint groupOuts() { return p.outs / p.groups; }          // Og
uint taps() { return groupChannels() * p.kernel_h * p.kernel_w; }  // K
uint outPixels() { return p.out_h * p.out_w; }                     // P

// The input coordinate tap (ky, kx) of output pixel (oy, ox) reads; negative or past the
// image in padding (signed arithmetic, so padding stays below zero).
int inputRow(uint oy, uint ky) { return int(oy * p.stride_h + ky * p.dilation_h) - int(p.pad_top); }
int inputCol(uint ox, uint kx) { return int(ox * p.stride_w + kx * p.dilation_w) - int(p.pad_left); }
