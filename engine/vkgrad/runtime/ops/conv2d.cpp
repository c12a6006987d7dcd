// conv2d: y = x ⋆ w + bias, NCHW, with stride, padding, dilation and groups (ops/conv2d.h),
// as im2col and matmul over a chunk of images at a time in an f32 scratch tensor (dead once
// the node has run). Its backward is one node that writes every gradient asked for (dx, dw,
// dbias, each under its own write mode) through the same scratch layout, so im2col runs once
// per chunk for dw and the product dy·w feeds col2im for dx.
#include "vkgrad/ops/conv2d.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Conv2d {
  enum In { x, w, bias, kInputs };  // bias: -1 when absent
  enum Out { y, scratch, kOutputs };
  using Attrs = ops::Conv2dParams;
};

struct Conv2dBackward {
  enum In { x, w, dy, kInputs };
  enum Out { dx, dw, dbias, scratch, kOutputs };  // -1 where not wanted; scratch: with dx or dw
  using Attrs = ops::Conv2dParams;
};

void backward(Backward& b, const Node& f) {
  Graph& g = b.graph();
  int grads[3] = {-1, -1, -1};  // by forward input slot
  ops::Write modes[3] = {ops::Write::Overwrite, ops::Write::Overwrite, ops::Write::Overwrite};
  for (int in : {Conv2d::x, Conv2d::w, Conv2d::bias}) {
    if (!b.needs(f, in)) continue;
    grads[in] = b.gradOf(f.inputs[size_t(in)]);
    modes[in] = b.contribute(grads[in]);
  }
  if (grads[Conv2d::x] < 0 && grads[Conv2d::w] < 0 && grads[Conv2d::bias] < 0) return;
  const auto& p = f.attr<Conv2d::Attrs>();
  const int x = f.inputs[Conv2d::x], w = f.inputs[Conv2d::w];
  int scratch = -1;
  if (grads[Conv2d::x] >= 0 || grads[Conv2d::w] >= 0)
    scratch =
        b.temp({ops::conv2dScratch(g.tensor(x).shape, g.tensor(w).shape, p)}, "conv2d.scratch");
  g.addNode({OpKind::Conv2dBackward,
             {x, w, b.dout(f, Conv2d::y)},
             {grads[Conv2d::x], grads[Conv2d::w], grads[Conv2d::bias], scratch},
             {modes[Conv2d::x], modes[Conv2d::w], modes[Conv2d::bias], ops::Write::Overwrite},
             p});
}

void launch(const Launch& l) {
  const ops::TensorView bias = l.in(Conv2d::bias);
  ops::conv2d(l.rec, l.in(Conv2d::x), l.in(Conv2d::w), bias.buffer ? &bias : nullptr,
              l.out(Conv2d::y), l.out(Conv2d::scratch), l.attr<Conv2d::Attrs>());
}

void launchBackward(const Launch& l) {
  using B = Conv2dBackward;
  const ops::TensorView dx = l.out(B::dx), dw = l.out(B::dw), dbias = l.out(B::dbias);
  ops::Conv2dGrads grads;
  if (dx.buffer) grads.dx = &dx, grads.dx_write = l.write(B::dx);
  if (dw.buffer) grads.dw = &dw, grads.dw_write = l.write(B::dw);
  if (dbias.buffer) grads.dbias = &dbias, grads.dbias_write = l.write(B::dbias);
  ops::conv2dBackward(l.rec, l.in(B::x), l.in(B::w), l.in(B::dy), grads, l.out(B::scratch),
                      l.attr<B::Attrs>());
}

}  // namespace

Tensor Graph::conv2d(Tensor x, Tensor w, Tensor bias, const ops::Conv2dParams& params) {
  check(x, "conv2d");
  check(w, "conv2d");
  if (bias) check(bias, "conv2d");
  if (tensor(x).dtype != DType::F32 || tensor(w).dtype != DType::F32 ||
      (bias && tensor(bias).dtype != DType::F32))
    throw ShapeError(describe("conv2d", {x, w, bias}) + ": operands must be f32");
  const Shape sx = shape(x), sw = shape(w);  // copies: output() may move tensors_
  const Shape y = ops::conv2dShape(sx, sw, bias ? &shape(bias) : nullptr, params);
  const int out = output(y);
  const int scratch =
      output({ops::conv2dScratch(sx, sw, params)}, DType::F32, false, "conv2d.scratch");
  addNode({OpKind::Conv2d, {x.id, w.id, bias ? bias.id : -1}, {out, scratch}, {}, params});
  return {out};
}

namespace defs {
const OpDef kConv2d{.name = "conv2d",
                    .inputs = Conv2d::kInputs,
                    .outputs = Conv2d::kOutputs,
                    .f32_outputs = 1u << Conv2d::scratch,
                    .backward = backward,
                    .launch = launch};
const OpDef kConv2dBackward{.name = "conv2dBackward",
                            .inputs = Conv2dBackward::kInputs,
                            .outputs = Conv2dBackward::kOutputs,
                            .f32_outputs = 1u << Conv2dBackward::scratch,
                            .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
