// Log-softmax over the last axis, forward and backward: y = x - logsumexp(x) per row, stable
// (the row maximum is subtracted, gathered online with the sum). Row layouts and variants
// as for softmax (ops/softmax.h).
#pragma once

#include "vkgrad/ops/softmax.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// x: (..., N), y: same shape. y = x - max - log(sum(exp(x - max))) along each row.
// -inf entries give -inf (the log of softmax's 0); a row that is entirely -inf gives all
// -inf, never NaN. +inf or NaN inputs give NaN. y may be x itself (of x's dtype); other
// overlaps throw. x and y in any float format, f32 arithmetic (as softmax, ops/softmax.h).
// Views may start at any multiple of their element size. Throws ShapeError naming the shapes
// before recording anything if y's shape differs, x is empty, or a buffer is too small.
void logSoftmax(vk::Recorder& rec, const TensorView& x, const TensorView& y,
                SoftmaxVariant variant = SoftmaxVariant::Auto);

// y: (..., N) logSoftmax's output, dy: (..., N) upstream gradient, dx: (..., N).
// dx (= or +=) dy - exp(y) * sum(dy) along each row. exp(-inf) = 0, so -inf entries (and
// every entry of an all -inf row) pass dy straight through, as y = x - lse does.
// dx may be exactly y or dy (of its dtype); other overlaps throw. Any float formats.
void logSoftmaxBackward(vk::Recorder& rec, const TensorView& y, const TensorView& dy,
                        const TensorView& dx, Write w = Write::Overwrite,
                        SoftmaxVariant variant = SoftmaxVariant::Auto);

}  // namespace vkgrad::ops
