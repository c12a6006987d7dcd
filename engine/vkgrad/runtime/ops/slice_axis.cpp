// sliceAxis: elements [begin, end) with a step along any axis (ops/strided_copy.h reads them
// through scaled strides), split into pieces, and the backward: dout written back to the
// positions it came from, zeros elsewhere (added, where the gradient already holds
// something). A first-axis slice with step 1 stays a view (Graph::slice), no copy.
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/strided_copy.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/map_reduce.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::graph {
namespace {

struct SliceAxis {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
  struct Attrs {
    int axis = 0;
    int64_t begin = 0, step = 1;
  };
};

struct SliceAxisBackward {
  enum In { dy, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = SliceAxis::Attrs;
};

// x's strides and start that address the slice's elements in slice order.
std::pair<std::array<int64_t, Shape::kMaxRank>, int64_t> sliceLayout(const Shape& x,
                                                                     const SliceAxis::Attrs& a) {
  auto strides = ops::contiguousStrides(x);
  const int64_t start = a.begin * strides[size_t(a.axis)];
  strides[size_t(a.axis)] *= a.step;
  return {strides, start};
}

void backward(Backward& b, const Node& f) {
  if (!b.needs(f, SliceAxis::x)) return;
  b.emit(OpKind::SliceAxisBackward, f, SliceAxis::x, {b.dout(f, SliceAxis::y)},
         f.attr<SliceAxis::Attrs>());
}

void launch(const Launch& l) {
  const ops::TensorView x = l.in(SliceAxis::x), y = l.out(SliceAxis::y);
  const auto [strides, start] = sliceLayout(x.shape, l.attr<SliceAxis::Attrs>());
  const auto y_strides = ops::contiguousStrides(y.shape);
  const size_t rank = size_t(y.shape.rank());
  ops::stridedCopy(l.rec, "sliceAxis", y.shape, {x, std::span(strides.data(), rank), start},
                   {y, std::span(y_strides.data(), rank), 0}, 1.0f, l.write(SliceAxis::y));
}

void launchBackward(const Launch& l) {
  const ops::TensorView dy = l.in(SliceAxisBackward::dy), dx = l.out(SliceAxisBackward::dx);
  const ops::Write w = l.write(SliceAxisBackward::dx);
  if (w == ops::Write::Overwrite) {
    // The positions no slice element reaches get 0; the slice's then add onto it.
    if (dx.offset % 4 != 0 || dx.bytes() % 4 != 0)
      throw Error("sliceAxisBackward: a gradient " + dx.shape.str() + " of " +
                  ops::dtypeName(dx.dtype) + " that does not fill whole words");
    l.rec.fill(*dx.buffer, 0u, dx.offset, dx.bytes());
  }
  const auto [strides, start] = sliceLayout(dx.shape, l.attr<SliceAxis::Attrs>());
  const auto dy_strides = ops::contiguousStrides(dy.shape);
  const size_t rank = size_t(dy.shape.rank());
  ops::stridedCopy(l.rec, "sliceAxisBackward", dy.shape,
                   {dy, std::span(dy_strides.data(), rank), 0},
                   {dx, std::span(strides.data(), rank), start}, 1.0f, ops::Write::Accumulate);
}

}  // namespace

Tensor Graph::sliceAxis(Tensor x, int axis, int64_t begin, int64_t end, int64_t step) {
  check(x, "sliceAxis");
  const Shape& s = shape(x);
  axis = normalizeAxis("sliceAxis", s, axis);
  const int64_t n = s[axis];
  const std::string what = describe("sliceAxis", {x}) + " axis " + std::to_string(axis) + " [" +
                           std::to_string(begin) + ":" + std::to_string(end) + ":" +
                           std::to_string(step) + "]";
  if (step < 1) throw ShapeError(what + ": the step must be positive");
  // Python's rules: negative bounds count from the end, and bounds clamp to the axis.
  if (begin < 0) begin += n;
  if (end < 0) end += n;
  begin = std::clamp<int64_t>(begin, 0, n);
  end = std::clamp<int64_t>(end, 0, n);
  const int64_t count = end > begin ? (end - begin + step - 1) / step : 0;
  if (count == 0) throw ShapeError(what + ": selects nothing");
  if (axis == 0 && step == 1) return slice(x, begin, end);
  int64_t dims[Shape::kMaxRank];
  for (int a = 0; a < s.rank(); ++a) dims[a] = a == axis ? count : s[a];
  const int y = output(Shape::of(dims, s.rank()), tensor(x).dtype, tensor(x).differentiable);
  addNode({OpKind::SliceAxis, {x.id}, {y}, {}, SliceAxis::Attrs{axis, begin, step}});
  return {y};
}

std::vector<Tensor> Graph::split(Tensor x, int axis, const std::vector<int64_t>& sizes) {
  check(x, "split");
  axis = normalizeAxis("split", shape(x), axis);
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 1)
      throw ShapeError(describe("split", {x}) + ": a piece of size " + std::to_string(size));
    total += size;
  }
  if (total != shape(x)[axis])
    throw ShapeError(describe("split", {x}) + ": pieces add up to " + std::to_string(total) +
                     ", axis " + std::to_string(axis) + " has " + std::to_string(shape(x)[axis]));
  std::vector<Tensor> pieces;
  int64_t begin = 0;
  for (int64_t size : sizes) {
    pieces.push_back(sliceAxis(x, axis, begin, begin + size));
    begin += size;
  }
  return pieces;
}

// Concat's backward: each input's gradient is its slice of dout (runtime/ops/concat.cpp).
void emitSliceOf(Backward& b, int t, int dout, int axis, int64_t begin) {
  b.emitTo(OpKind::SliceAxis, t, {dout}, SliceAxis::Attrs{axis, begin, 1});
}

namespace defs {
const OpDef kSliceAxis{.name = "sliceAxis",
                       .inputs = SliceAxis::kInputs,
                       .outputs = SliceAxis::kOutputs,
                       .backward = backward,
                       .launch = launch};
const OpDef kSliceAxisBackward{.name = "sliceAxisBackward",
                               .inputs = SliceAxisBackward::kInputs,
                               .outputs = SliceAxisBackward::kOutputs,
                               .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
