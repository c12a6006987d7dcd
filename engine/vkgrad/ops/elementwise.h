// Binary elementwise ops (add, sub, mul) with a broadcast second operand, and scale;
// forward and backward side by side. Every tensor may be stored in f32, f16 or bf16, each
// in its own (ops/storage.h); the arithmetic is f32 and each output is rounded once, as it
// is stored. A broadcast b's gradient is a sum (reduce.h) accumulated in f32.
//
// Broadcast rule: out has a's shape; b is numpy-broadcast against a (right-aligned, extra
// leading 1s of b dropped), with one restriction: the axes where b has a's size (> 1) must
// be adjacent among the axes of a with size > 1. So, for a of shape (B,T,C):
//   b (B,T,C)                same shape
//   b (C), (1,C), (1,1,C)    a bias, repeated on every row            (last-axis broadcast)
//   b (T,C)                  a positional embedding, repeated over B  (leading-axis broadcast)
//   b (B,T,1)                one value per row, repeated along C
//   b (T,1), (1), (1,1,1)    combinations of the above, or a scalar
// but not b (B,1,C). In general a is seen as (outer, kept, inner) with b = (kept), and
// out[o][m][k] = op(a[o][m][k], b[m]) (ops/kept_axis.h broadcastAxes() computes the view).
//
// Kernels: inputs are read through RGBA32F texel buffers where the views fit the device's
// texel limits (on lavapipe about 5x faster than storage-buffer loads), else through storage
// buffers (16-bit tensors always take these). Any view offset that is a multiple of the
// element size works.
//
// In place: out may be exactly a, or exactly b when b has a's shape (each element is read
// before it is written), in that input's dtype; any other overlap is a ShapeError.
// Backward: each gradient may be exactly a same-shape input (dout, a or b) of its dtype, but
// gradients may not overlap each other, and a broadcast b's gradient may not overlap any
// input. An empty view (no buffer) as da or db
// skips that gradient.
#pragma once

#include "vkgrad/ops/kept_axis.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// out = a + b, a - b, a * b (or +=, with Write::Accumulate). a, out: (...); b broadcasts.
void add(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& out,
         Write w = Write::Overwrite);
void sub(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& out,
         Write w = Write::Overwrite);
void mul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& out,
         Write w = Write::Overwrite);
// y = alpha * x. x, y: the same shape.
void scale(vk::Recorder& rec, const TensorView& x, const TensorView& y, float alpha,
           Write w = Write::Overwrite);
// out = alpha * b repeated over out, b: (f.kept), out: (f.outer, f.kept, f.inner) elements.
// The backward of a broadcast and of the reductions in reduce.h.
void broadcast(vk::Recorder& rec, const TensorView& b, const TensorView& out, KeptAxis f,
               float alpha = 1.0f, Write w = Write::Overwrite);

// dout: a's shape; da: a's shape; db: b's shape (the sum of dout over b's broadcast axes).
void addBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& da,
                 const TensorView& db, Write wa = Write::Overwrite, Write wb = Write::Overwrite);
void subBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& da,
                 const TensorView& db, Write wa = Write::Overwrite, Write wb = Write::Overwrite);
// da = dout * b (b broadcast), db = sum of dout * a over b's broadcast axes.
void mulBackward(vk::Recorder& rec, const TensorView& a, const TensorView& b,
                 const TensorView& dout, const TensorView& da, const TensorView& db,
                 Write wa = Write::Overwrite, Write wb = Write::Overwrite);
// dx = alpha * dy.
void scaleBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx, float alpha,
                   Write w = Write::Overwrite);

}  // namespace vkgrad::ops
