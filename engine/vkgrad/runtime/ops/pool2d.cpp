// maxPool2d and avgPool2d over NCHW windows (ops/pool2d.h). Max pooling keeps each window's
// chosen pixel as a second, u32 output, so its backward sends each gradient to that pixel
// with one writer per input pixel (no atomics); average pooling's backward needs only dy.
#include "vkgrad/ops/pool2d.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct MaxPool2d {
  enum In { x, kInputs };
  enum Out { y, argmax, kOutputs };  // argmax: u32, iy·W + ix within each plane
  using Attrs = ops::Pool2dParams;
};
struct MaxPool2dBackward {
  enum In { dy, argmax, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = ops::Pool2dParams;
};
struct AvgPool2d {
  enum In { x, kInputs };
  enum Out { y, kOutputs };
  using Attrs = ops::Pool2dParams;
};
struct AvgPool2dBackward {
  enum In { dy, kInputs };
  enum Out { dx, kOutputs };
  using Attrs = ops::Pool2dParams;
};

void maxBackward(Backward& b, const Node& f) {
  if (b.needs(f, MaxPool2d::x))
    b.emit(OpKind::MaxPool2dBackward, f, MaxPool2d::x,
           {b.dout(f, MaxPool2d::y), f.outputs[MaxPool2d::argmax]}, f.attr<MaxPool2d::Attrs>());
}

void avgBackward(Backward& b, const Node& f) {
  if (b.needs(f, AvgPool2d::x))
    b.emit(OpKind::AvgPool2dBackward, f, AvgPool2d::x, {b.dout(f, AvgPool2d::y)},
           f.attr<AvgPool2d::Attrs>());
}

void launchMax(const Launch& l) {
  ops::maxPool2d(l.rec, l.in(MaxPool2d::x), l.out(MaxPool2d::y), l.out(MaxPool2d::argmax),
                 l.attr<MaxPool2d::Attrs>());
}

void launchMaxBackward(const Launch& l) {
  using B = MaxPool2dBackward;
  ops::maxPool2dBackward(l.rec, l.in(B::dy), l.in(B::argmax), l.out(B::dx), l.attr<B::Attrs>(),
                         l.write(B::dx));
}

void launchAvg(const Launch& l) {
  ops::avgPool2d(l.rec, l.in(AvgPool2d::x), l.out(AvgPool2d::y), l.attr<AvgPool2d::Attrs>());
}

void launchAvgBackward(const Launch& l) {
  using B = AvgPool2dBackward;
  ops::avgPool2dBackward(l.rec, l.in(B::dy), l.out(B::dx), l.attr<B::Attrs>(), l.write(B::dx));
}

}  // namespace

Tensor Graph::maxPool2d(Tensor x, const ops::Pool2dParams& params) {
  check(x, "maxPool2d");
  if (tensor(x).dtype != DType::F32)
    throw ShapeError(describe("maxPool2d", {x}) + ": x must be f32");
  const Shape y = ops::pool2dShape("maxPool2d", shape(x), params);
  const int out = output(y), argmax = output(y, DType::U32, false, "maxPool2d.argmax");
  addNode({OpKind::MaxPool2d, {x.id}, {out, argmax}, {}, params});
  return {out};
}

Tensor Graph::avgPool2d(Tensor x, const ops::Pool2dParams& params) {
  check(x, "avgPool2d");
  if (tensor(x).dtype != DType::F32)
    throw ShapeError(describe("avgPool2d", {x}) + ": x must be f32");
  const int out = output(ops::pool2dShape("avgPool2d", shape(x), params));
  addNode({OpKind::AvgPool2d, {x.id}, {out}, {}, params});
  return {out};
}

namespace defs {
const OpDef kMaxPool2d{.name = "maxPool2d",
                       .inputs = MaxPool2d::kInputs,
                       .outputs = MaxPool2d::kOutputs,
                       .backward = maxBackward,
                       .launch = launchMax};
const OpDef kMaxPool2dBackward{.name = "maxPool2dBackward",
                               .inputs = MaxPool2dBackward::kInputs,
                               .outputs = MaxPool2dBackward::kOutputs,
                               .launch = launchMaxBackward};
const OpDef kAvgPool2d{.name = "avgPool2d",
                       .inputs = AvgPool2d::kInputs,
                       .outputs = AvgPool2d::kOutputs,
                       .backward = avgBackward,
                       .launch = launchAvg};
const OpDef kAvgPool2dBackward{.name = "avgPool2dBackward",
                               .inputs = AvgPool2dBackward::kInputs,
                               .outputs = AvgPool2dBackward::kOutputs,
                               .launch = launchAvgBackward};
}  // namespace defs

}  // namespace vkgrad::graph
