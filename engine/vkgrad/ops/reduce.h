// Sums and means over the last axis or over rows, forward and backward. Every reduction
// runs in a fixed order for a given shape (strided per-invocation sums, then a fixed
// shared-memory tree; no atomics), so the same input gives the same bits on a device.
// Any view offset that is a multiple of 4 bytes works. Outputs may not overlap inputs. An empty
// reduction axis is a ShapeError; zero rows record nothing.
// The sums (and their forms below) take x (and y) and write out in f32, f16 or bf16, each as
// its view says: the arithmetic is f32 and only the store of out rounds (a bf16 dy summed into
// an f32 or bf16 bias gradient). The backward functions broadcast (ops/elementwise.h) and
// take what it takes.
#pragma once

#include "vkgrad/ops/kept_axis.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// x: (...,N) -> out: (...) (x's shape without its last axis; (...,1) is accepted too).
void sumLastAxis(vk::Recorder& rec, const TensorView& x, const TensorView& out,
                 Write w = Write::Overwrite);
void meanLastAxis(vk::Recorder& rec, const TensorView& x, const TensorView& out,
                  Write w = Write::Overwrite);
// dout: (...), dx: (...,N); dx = dout broadcast along the last axis (/ N for the mean).
void sumLastAxisBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                         Write w = Write::Overwrite);
void meanLastAxisBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                          Write w = Write::Overwrite);

// x: (...,N) -> out: (N), summing every row (all leading axes): a bias gradient.
// out may also be written (1,N), (1,1,N), ...
void sumRows(vk::Recorder& rec, const TensorView& x, const TensorView& out,
             Write w = Write::Overwrite);
void meanRows(vk::Recorder& rec, const TensorView& x, const TensorView& out,
              Write w = Write::Overwrite);
// dout: (N), dx: (...,N); dx = dout repeated on every row (/ rows for the mean).
void sumRowsBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                     Write w = Write::Overwrite);
void meanRowsBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& dx,
                      Write w = Write::Overwrite);

// Which kernel a reduction reads its input with. Auto: texel buffers (RGBA32F where the
// contiguous axis allows, else R32F; about 5x faster than storage loads on lavapipe) when the
// views fit the device's texel limits and every tensor is f32, else storage buffers.
enum class ReduceVariant { Auto, Storage, Texel };

// The general form behind the functions above and the gradients of broadcast operands:
// x (and y, when given) seen as f, out: f.kept elements;
//   out[m] (= or +=) alpha * sum over o, k of x[o][m][k] (* y[o][m][k]).
// op names the caller in errors. Checks sizes, dtypes and overlaps; the caller checks shapes.
// Throws Error if Texel is asked for and the views do not fit the texel limits or a tensor
// is 16-bit.
void sumOverKeptAxis(vk::Recorder& rec, const char* op, const TensorView& x, const TensorView* y,
               const TensorView& out, KeptAxis f, float alpha, Write w,
               ReduceVariant variant = ReduceVariant::Auto);

}  // namespace vkgrad::ops
