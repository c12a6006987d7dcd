// 2-D convolution, NCHW (a cross-correlation, as every framework computes it), with stride,
// padding per side, dilation and groups; and its backward: the input's, the weight's and the
// bias's gradients.
//
//   y[n, o, oy, ox] = bias[o] + Σ_{c<C/G, ky, kx} w[o, c, ky, kx] ·
//                     x[n, g·C/G + c, oy·sh - pt + ky·dh, ox·sw - pl + kx·dw]   (g = o / (O/G))
//
// with x read as 0 outside the image. It runs as im2col and the matmul kernels
// (ops/matmul.h), a chunk of images at a time: the chunk's patches are laid out as rows,
// cols (G, Nc·OH·OW, C/G·KH·KW), and one product per chunk multiplies them by the weights,
// (G, Nc·OH·OW, O/G) = cols · wᵀ; a pass puts that back in NCHW order and adds the bias. The
// backward gathers dy into the same layout, dw += dysᵀ · cols and dcols = dys · w per chunk,
// and col2im sums, for each input pixel, the kernel taps that reached it (no atomics: the same
// bits every run). BENCHMARKS.md compares this with a direct kernel on lavapipe.
//
// x, y, dy, dx may be f32, f16 or bf16 (ops/storage.h); w, bias, their gradients and the
// scratch are f32 (a graph's parameters and partial sums).
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t groups = 1;
  // The same stride, padding and dilation on both axes and every side.
  static Conv2dParams square(int64_t stride, int64_t pad, int64_t dilation = 1, int64_t groups = 1);
  std::string str() const;  // "stride 1x1 pad 1,1,1,1 dilation 1x1 groups 1"
};

// The shape rule, Vulkan-free (the graph builder uses it too): x (N,C,H,W), w (O, C/G, KH, KW)
// with G dividing C and O, bias (O) if given -> y (N, O, OH, OW) with
//   OH = (H + pt + pb - dh·(KH-1) - 1) / sh + 1   (and OW alike), at least 1.
// Throws ShapeError "conv2d: x (2,3,8,8) w (4,2,3,3) stride 1x1 ...: <why>".
Shape conv2dShape(const Shape& x, const Shape& w, const Shape* bias, const Conv2dParams& p);

// Images per chunk: as many as keep cols within 2^24 floats (64 MiB, half the smallest
// maxStorageBufferRange Vulkan allows), at least 1, at most N.
int64_t conv2dChunk(const Shape& x, const Shape& w, const Conv2dParams& p);
// f32 elements of scratch conv2d and conv2dBackward need for chunks of `images` images (0:
// conv2dChunk's): a chunk's cols and its product. Given less (at least one image's), they
// take chunks of as many images as it holds.
int64_t conv2dScratch(const Shape& x, const Shape& w, const Conv2dParams& p, int64_t images = 0);

// x: (N,C,H,W), w: (O,C/G,KH,KW), bias: (O) or null, y: (N,O,OH,OW), scratch: f32, at least
// conv2dScratch(..., 1) elements. y may not overlap anything else. Throws ShapeError before
// recording anything on bad shapes, sizes or overlaps.
void conv2d(vk::Recorder& rec, const TensorView& x, const TensorView& w, const TensorView* bias,
            const TensorView& y, const TensorView& scratch, const Conv2dParams& p);

// The same forward as one direct kernel (conv2d/direct.comp: an invocation per output, no
// scratch); what the im2col route is measured against (vkgrad-bench conv2d).
void conv2dDirect(vk::Recorder& rec, const TensorView& x, const TensorView& w,
                  const TensorView* bias, const TensorView& y, const Conv2dParams& p);

// The gradients conv2dBackward writes, each (=|+=) as its write says; null ones are skipped.
struct Conv2dGrads {
  const TensorView* dx = nullptr;     // (N,C,H,W)
  const TensorView* dw = nullptr;     // (O,C/G,KH,KW)
  const TensorView* dbias = nullptr;  // (O)
  Write dx_write = Write::Overwrite, dw_write = Write::Overwrite, dbias_write = Write::Overwrite;
};

// dy: (N,O,OH,OW). dx = col2im(dy·w), dw = Σ_n dyᵀ·im2col(x), dbias = Σ_{n,oy,ox} dy. x is read
// only for dw. Same checks as conv2d; gradients may not overlap any input or each other.
void conv2dBackward(vk::Recorder& rec, const TensorView& x, const TensorView& w,
                    const TensorView& dy, const Conv2dGrads& grads, const TensorView& scratch,
                    const Conv2dParams& p);

}  // namespace vkgrad::ops
