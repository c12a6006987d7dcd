// The general elementwise and reduction kernel: out (= or +=) alpha * FOLD over the reduced
// axes of FN(x, y, z), with x, y and z numpy-broadcast (right-aligned, size-1 or missing axes
// repeated) over a space of up to 6 axes. It is what the graph's general ops run where the
// model kernels' shapes (ops/elementwise.h's one-sided broadcast, ops/reduce.h's last axis
// and rows) do not fit: binary ops broadcast on both sides, where, sums, means and maxima
// over any set of axes, and the gradients of all of them. Deterministic: each output element
// folds its inputs in a fixed order (sums Kahan-compensated), no atomics.
//
// Tensors are f32, f16 or bf16 (the arithmetic f32, the store rounding once), except the
// condition of Where and the masks (u32, nonzero meaning true). out may not overlap an input
// unless nothing is folded and out is exactly that input (in place, of its dtype).
#pragma once

#include <cstdint>
#include <span>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The order is the FN specialization constant of shaders/map_reduce/map_reduce.comp.
enum class MapFn {
  X,            // x
  Add,          // x + y
  Sub,          // x - y
  Mul,          // x * y
  Div,          // x / y
  Max,          // max(x, y)
  Min,          // min(x, y)
  Where,        // x ? y : z    (x: u32 condition)
  MaskTrue,     // x ? y : 0    (where's gradient for y)
  MaskFalse,    // x ? 0 : y    (... for z)
  DivGradB,     // -x * y / z^2 (div's gradient for its divisor, from dout, a, b)
  SelectEqual,  // x == y ? z : 0 (a maximum's gradient: input, maximum, dout)
};
const char* mapFnName(MapFn fn);
int mapFnInputs(MapFn fn);  // 1, 2 or 3

enum class Fold { Sum, Max };  // max: NaN propagates, as numpy

// The shape both operands broadcast to (numpy rules), or ShapeError "<op>: a (4,3), b (5,1)
// do not broadcast".
Shape broadcastShape(const char* op, const Shape& a, const Shape& b);
// The shape of space with the axes in `axes` (bit a: axis a) removed, or kept as size 1.
// Every axis reduced gives (1).
Shape reducedShape(const Shape& space, uint32_t axes, bool keep_dims);

// inputs: mapFnInputs(fn) views, each broadcasting to space; out: reducedShape(space, axes)
// elements (any shape with that count: keep_dims or not). alpha scales the folded value (a
// mean's 1/n). scratch: f32, at least mapReduceScratch(space, axes) elements (none where that
// is 0), overwritten, disjoint from everything else. Throws ShapeError naming the op and
// shapes before recording anything.
void mapReduce(vk::Recorder& rec, MapFn fn, Fold fold, std::span<const TensorView> inputs,
               const Shape& space, uint32_t axes, const TensorView& out, float alpha = 1.0f,
               Write w = Write::Overwrite, const TensorView& scratch = {});
// f32 elements of scratch mapReduce needs over space folding `axes`: 0 unless an output folds
// more than 1024 elements. A longer fold runs in parts of 1024 consecutive elements (in the
// reduced axes' row-major order), one result per output and part, those folded again:
// every lane of the device busy, and no invocation looping for long (llvmpipe ends one after
// 65,535 loop iterations without a word). The same order on every device.
int64_t mapReduceScratch(const Shape& space, uint32_t axes);

// The common cases, by name: out = fn(a, b) broadcast (out's shape is the broadcast shape),
// and out = alpha * sum / max of x over `axes`.
void binary(vk::Recorder& rec, MapFn fn, const TensorView& a, const TensorView& b,
            const TensorView& out, Write w = Write::Overwrite);
void reduce(vk::Recorder& rec, Fold fold, const TensorView& x, uint32_t axes, const TensorView& out,
            float alpha = 1.0f, Write w = Write::Overwrite, const TensorView& scratch = {});

}  // namespace vkgrad::ops
