// 2-D max and average pooling, NCHW, with kernel, stride and padding per axis; and their
// backward passes. A window's padding never wins a max; an average divides by the whole
// window (count_include_pad, PyTorch's default) or by its pixels inside the image.
//
//   max: y[n, c, oy, ox] = max x[n, c, oy·sh - ph + ky, ox·sw - pw + kx] over the window's
//        pixels inside the image, and argmax[n, c, oy, ox] = iy·W + ix of the first maximum
//        (row-major), so the backward sends dy to the pixel the forward chose;
//   avg: y = Σ those pixels / (KH·KW, or how many there are).
//
// The backward passes run one invocation per input pixel, which sums the windows that reach
// it (for max, those whose argmax names it) in a fixed order: no atomics, the same bits every
// run. x, y, dy and dx may be f32, f16 or bf16 (ops/storage.h); argmax is u32.
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

struct Pool2dParams {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_h = 0, pad_w = 0;   // on both sides of each axis, at most half the kernel
  bool count_include_pad = true;  // average pooling only
  // A square window: stride 0 means the kernel's size (non-overlapping windows).
  static Pool2dParams square(int64_t kernel, int64_t stride = 0, int64_t pad = 0);
  std::string str() const;  // "kernel 2x2 stride 2x2 pad 0x0"
};

// The shape rule, Vulkan-free: x (N,C,H,W) -> (N, C, (H + 2ph - KH)/sh + 1, (W + 2pw - KW)/sw + 1).
// Throws ShapeError "maxPool2d: x (2,3,8,8) kernel 3x3 stride 1x1 pad 2x2: <why>" (`op` names
// the op) for a bad rank, a kernel or stride below 1, padding past half the kernel (a window of
// padding alone), or a window larger than the padded input.
Shape pool2dShape(const char* op, const Shape& x, const Pool2dParams& p);

// x: (N,C,H,W); y and argmax (u32): pool2dShape's. y and argmax overlap nothing else.
void maxPool2d(vk::Recorder& rec, const TensorView& x, const TensorView& y,
               const TensorView& argmax, const Pool2dParams& p);
// dy, argmax: (N,C,OH,OW); dx: (N,C,H,W), (=|+=) the gradient.
void maxPool2dBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& argmax,
                       const TensorView& dx, const Pool2dParams& p, Write write = Write::Overwrite);

void avgPool2d(vk::Recorder& rec, const TensorView& x, const TensorView& y, const Pool2dParams& p);
void avgPool2dBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx,
                       const Pool2dParams& p, Write write = Write::Overwrite);

}  // namespace vkgrad::ops
