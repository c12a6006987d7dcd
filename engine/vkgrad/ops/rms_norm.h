// RMS norm over the last axis (Llama's LlamaRMSNorm): the forward saves each row's 1/rms,
// the backward uses it for dx and dgamma. Every tensor but the backward's scratch (f32) may
// be f32, f16 or bf16, each as its view says; the mean of squares and rstd are f32 whatever
// they are stored in, and a 16-bit store rounds once, to nearest even (Hugging Face rounds
// x * rstd to the input's dtype before the product with gamma: twice for bf16 activations).
// 16-bit tensors need the device's 16-bit storage. Any view offset that is a multiple of its
// element size works.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule of rmsNorm, Vulkan-free (the graph builder uses it too): x a non-empty
// (..., N) with rows and N within 32 bits, gamma (N), eps finite and >= 0. Returns the shape
// of rstd, (rows); y is shaped like x. Throws ShapeError "rmsNorm: x (4,7) needs gamma (7),
// got (8)".
Shape rmsNormStatsShape(const Shape& x, const Shape& gamma, float eps);

// x: (..., N); gamma: (N); y: like x; rstd: (rows), rows = numel / N.
// y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps), the squares summed in f32 with
// compensation. y may be x itself (in place, then of x's dtype); other overlaps are undefined.
// Throws ShapeError naming the shapes before recording anything.
void rmsNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma, const TensorView& y,
             const TensorView& rstd, float eps = 1e-6f);

// f32 elements of scratch rmsNormBackward needs when it computes dgamma.
int64_t rmsNormBackwardScratch(int64_t rows, int64_t n);

// x, dy: (..., N) the forward's input and the gradient of its output; gamma: (N); rstd:
// (rows) as the forward saved it. Outputs, each written (= or += as its Write says):
//   dx: like x      rstd * (g - xhat * mean_row(g * xhat)), g = dy * gamma, xhat = x * rstd
//                   (an empty view, buffer null: not computed)
//   dgamma: (N)     sum over rows of dy * xhat (likewise optional)
// scratch: (>= rmsNormBackwardScratch(rows, N)) f32, overwritten; needed only for dgamma.
// Outputs may not overlap each other or any input. Throws ShapeError naming the shapes before
// recording anything (also for dgamma of more than 2^20 rows on a CPU device: loop limit).
void rmsNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                     const TensorView& rstd, const TensorView& dy, const TensorView& dx,
                     const TensorView& dgamma, const TensorView& scratch, Write dx_write,
                     Write dgamma_write);

}  // namespace vkgrad::ops
