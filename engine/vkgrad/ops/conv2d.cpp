#include "vkgrad/ops/conv2d.h"

#include <algorithm>
#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// conv2d/geometry.glsl's push constants.
struct ConvPush {
  uint32_t n, images, channels, height, width, outs, out_h, out_w, kernel_h, kernel_w;
  uint32_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w, groups;
  uint32_t skip_a = 0, skip_b = 0, skip_c = 0, skip_d = 0;
};
static_assert(sizeof(ConvPush) == 84);

// cols stays within this many floats per chunk: half of the 128 MiB maxStorageBufferRange
// that Vulkan guarantees, so each matmul operand binds as one range on every device.
constexpr int64_t kColsBudget = int64_t(1) << 24;
// The product's rows start this many floats after cols' start rounds up to, so both start
// on any device's binding alignment (at most 256 bytes) when the scratch does.
constexpr int64_t kAlign = 64;

std::string describe(const char* op, const Shape& x, const Shape& w, const Conv2dParams& p) {
  return std::string(op) + ": x " + x.str() + " w " + w.str() + " " + p.str();
}

// The geometry of a whole convolution, from shapes the shape rule has accepted.
struct Geometry {
  int64_t n, c, h, w, o, oh, ow, kh, kw, g;
  int64_t pixels() const { return oh * ow; }
  int64_t taps() const { return (c / g) * kh * kw; }  // per group
  int64_t colsFloats(int64_t images) const {          // every group's
    return (images * pixels() * c * kh * kw + kAlign - 1) / kAlign * kAlign;
  }
};

int64_t scratchFloats(const Geometry& G, int64_t images) {
  return G.colsFloats(images) + images * G.pixels() * G.o;
}

Geometry geometry(const Shape& x, const Shape& w, const Shape& y, const Conv2dParams& p) {
  return {x[0], x[1], x[2], x[3], w[0], y[2], y[3], w[2], w[3], p.groups};
}

ConvPush push(const Geometry& G, const Conv2dParams& p, int64_t images, uint64_t n) {
  return {uint32_t(n),         uint32_t(images),     uint32_t(G.c),          uint32_t(G.h),
          uint32_t(G.w),       uint32_t(G.o),        uint32_t(G.oh),         uint32_t(G.ow),
          uint32_t(G.kh),      uint32_t(G.kw),       uint32_t(p.stride_h),   uint32_t(p.stride_w),
          uint32_t(p.pad_top), uint32_t(p.pad_left), uint32_t(p.dilation_h), uint32_t(p.dilation_w),
          uint32_t(G.g)};
}

// Images [n0, n0 + count) of an NCHW tensor.
TensorView images(const TensorView& t, int64_t n0, int64_t count) {
  const int64_t per = t.shape[1] * t.shape[2] * t.shape[3];
  return {t.buffer,
          t.offset + uint64_t(n0 * per) * dtypeBytes(t.dtype),
          {count, t.shape[1], t.shape[2], t.shape[3]},
          t.dtype};
}

// A matrix per group: (G, rows, cols), or (rows, cols) for one group (a plain product).
Shape perGroup(int64_t groups, int64_t rows, int64_t cols) {
  return groups == 1 ? Shape{rows, cols} : Shape{groups, rows, cols};
}

// cols and the product's rows for a chunk of `count` images, inside scratch.
struct Chunk {
  TensorView cols, rows;
};
Chunk chunk(const Geometry& G, const TensorView& scratch, int64_t count) {
  const int64_t m = count * G.pixels();
  Chunk c;
  c.cols = {scratch.buffer, scratch.offset, perGroup(G.g, m, G.taps()), DType::F32};
  c.rows = {scratch.buffer, scratch.offset + uint64_t(G.colsFloats(count)) * 4,
            perGroup(G.g, m, G.o / G.g), DType::F32};
  return c;
}

void grid(vk::Recorder& rec, const vk::Kernel& kernel, std::span<const vk::Arg> args,
          const ConvPush& push) {
  vk::Context& ctx = rec.context();
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(ctx, push.n, workgroupSize(ctx)));
}

void im2col(vk::Recorder& rec, const Geometry& G, const Conv2dParams& p, const TensorView& x,
            const TensorView& cols, int64_t count) {
  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), bc = bindStorage(ctx, cols);
  ConvPush pc = push(G, p, count, uint64_t(cols.shape.numel()));
  pc.skip_a = bx.skip, pc.skip_b = bc.skip;
  const vk::Kernel& k = floatKernel(ctx, "conv2d/im2col", {{"local_size_x", workgroupSize(ctx)}},
                                    {{"x_dtype", x.dtype}, {"cols_dtype", DType::F32}});
  const vk::Arg args[] = {bx.arg, bc.arg};
  // An invocation per row of cols (its taps in a loop): workgroups for the rows.
  const uint64_t rows = uint64_t(cols.shape.numel() / G.taps());
  rec.dispatchGroups(k, args, &pc, sizeof(pc), gridGroups(ctx, rows, workgroupSize(ctx)));
}

// The checks conv2d and its backward share: shapes, formats, scratch size.
Geometry check(const char* op, const TensorView& x, const TensorView& w, const TensorView* bias,
               const Shape& y, const TensorView& scratch, const Conv2dParams& p) {
  const Shape want = conv2dShape(x.shape, w.shape, bias ? &bias->shape : nullptr, p);
  if (!(y == want))
    throw ShapeError(describe(op, x.shape, w.shape, p) + ": y/dy " + y.str() + " must be " +
                     want.str());
  checkFloatOperand(op, "x", x);
  checkOperand(op, "w", w);
  if (bias) checkOperand(op, "bias", *bias);
  checkOperand(op, "scratch", scratch);
  const int64_t need = conv2dScratch(x.shape, w.shape, p, 1);
  if (scratch.shape.numel() < need)
    throw ShapeError(describe(op, x.shape, w.shape, p) + ": scratch " + scratch.shape.str() +
                     " must hold at least " + std::to_string(need) + " floats");
  return geometry(x.shape, w.shape, y, p);
}

// Images per chunk: conv2dChunk's, fewer where the scratch holds fewer.
int64_t chunkImages(const Geometry& G, const Shape& x, const Shape& w, const TensorView& scratch,
                    const Conv2dParams& p) {
  int64_t count = conv2dChunk(x, w, p);
  while (count > 1 && scratchFloats(G, count) > scratch.shape.numel()) --count;
  return count;
}

}  // namespace

Conv2dParams Conv2dParams::square(int64_t stride, int64_t pad, int64_t dilation, int64_t groups) {
  return {stride, stride, pad, pad, pad, pad, dilation, dilation, groups};
}

std::string Conv2dParams::str() const {
  auto s = [](int64_t v) { return std::to_string(v); };
  return "stride " + s(stride_h) + "x" + s(stride_w) + " pad " + s(pad_top) + "," + s(pad_left) +
         "," + s(pad_bottom) + "," + s(pad_right) + " dilation " + s(dilation_h) + "x" +
         s(dilation_w) + " groups " + s(groups);
}

Shape conv2dShape(const Shape& x, const Shape& w, const Shape* bias, const Conv2dParams& p) {
  const std::string shapes = describe("conv2d", x, w, p) + ": ";
  if (x.rank() != 4 || x.numel() == 0) throw ShapeError(shapes + "x must be a non-empty (N,C,H,W)");
  if (w.rank() != 4 || w.numel() == 0)
    throw ShapeError(shapes + "w must be a non-empty (O,C/groups,KH,KW)");
  if (p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 || p.dilation_w < 1 || p.groups < 1)
    throw ShapeError(shapes + "strides, dilations and groups must be at least 1");
  if (p.pad_top < 0 || p.pad_left < 0 || p.pad_bottom < 0 || p.pad_right < 0)
    throw ShapeError(shapes + "padding must not be negative");
  if (x[1] % p.groups != 0 || w[0] % p.groups != 0)
    throw ShapeError(shapes + "groups must divide the input and output channels");
  if (w[1] * p.groups != x[1])
    throw ShapeError(shapes +
                     "w's second dim must be C/groups = " + std::to_string(x[1] / p.groups));
  if (bias && !(*bias == Shape{w[0]}))
    throw ShapeError(shapes + "bias " + bias->str() + " must be (" + std::to_string(w[0]) + ")");
  const int64_t span_h = p.dilation_h * (w[2] - 1) + 1, span_w = p.dilation_w * (w[3] - 1) + 1;
  const int64_t in_h = x[2] + p.pad_top + p.pad_bottom, in_w = x[3] + p.pad_left + p.pad_right;
  if (span_h > in_h || span_w > in_w)
    throw ShapeError(shapes + "the dilated kernel is larger than the padded input");
  // The kernels index in 32 bits; 2^31 elements in any tensor or chunk is far past a binding.
  const Shape y{x[0], w[0], (in_h - span_h) / p.stride_h + 1, (in_w - span_w) / p.stride_w + 1};
  if (x.numel() >= (int64_t(1) << 31) || y.numel() >= (int64_t(1) << 31) ||
      y[2] * y[3] * x[1] * w[2] * w[3] >= (int64_t(1) << 31))
    throw ShapeError(shapes + "more than 2^31 elements");
  return y;
}

int64_t conv2dChunk(const Shape& x, const Shape& w, const Conv2dParams& p) {
  const Shape y = conv2dShape(x, w, nullptr, p);
  const int64_t per_image = y[2] * y[3] * x[1] * w[2] * w[3];  // every group's taps
  return std::clamp<int64_t>(kColsBudget / per_image, 1, x[0]);
}

int64_t conv2dScratch(const Shape& x, const Shape& w, const Conv2dParams& p, int64_t images) {
  const Shape y = conv2dShape(x, w, nullptr, p);
  const int64_t count = images > 0 ? std::min(images, x[0]) : conv2dChunk(x, w, p);
  return scratchFloats(geometry(x, w, y, p), count);
}

void conv2d(vk::Recorder& rec, const TensorView& x, const TensorView& w, const TensorView* bias,
            const TensorView& y, const TensorView& scratch, const Conv2dParams& p) {
  const Geometry G = check("conv2d", x, w, bias, y.shape, scratch, p);
  checkFloatOperand("conv2d", "y", y);
  checkAlias("conv2d", "y", y, "x", x, false);
  checkAlias("conv2d", "y", y, "w", w, false);
  checkAlias("conv2d", "y", y, "scratch", scratch, false);
  checkAlias("conv2d", "scratch", scratch, "x", x, false);
  checkAlias("conv2d", "scratch", scratch, "w", w, false);
  if (bias) {
    checkAlias("conv2d", "y", y, "bias", *bias, false);
    checkAlias("conv2d", "scratch", scratch, "bias", *bias, false);
  }

  vk::Context& ctx = rec.context();
  const TensorView wg{w.buffer, w.offset, perGroup(G.g, G.o / G.g, G.taps()), DType::F32};
  const vk::Kernel& scatter = floatKernel(
      ctx, "conv2d/scatter", {{"local_size_x", workgroupSize(ctx)}, {"kBias", bias != nullptr}},
      {{"rows_dtype", DType::F32}, {"bias_dtype", DType::F32}, {"y_dtype", y.dtype}});
  const int64_t step = chunkImages(G, x.shape, w.shape, scratch, p);
  for (int64_t n0 = 0; n0 < G.n; n0 += step) {
    const int64_t count = std::min(step, G.n - n0);
    const Chunk c = chunk(G, scratch, count);
    im2col(rec, G, p, images(x, n0, count), c.cols, count);
    MatmulOptions mo;
    mo.trans_b = true;  // rows = cols · wᵀ
    matmul(rec, c.cols, wg, c.rows, mo);
    const TensorView yc = images(y, n0, count);
    const Bound br = bindStorage(ctx, c.rows), by = bindStorage(ctx, yc);
    const Bound bb = bias ? bindStorage(ctx, *bias) : br;  // a dummy the kernel never reads
    ConvPush pc = push(G, p, count, uint64_t(yc.shape.numel()));
    pc.skip_a = br.skip, pc.skip_b = bb.skip, pc.skip_c = by.skip;
    const vk::Arg args[] = {br.arg, bb.arg, by.arg};
    grid(rec, scatter, args, pc);
  }
}

void conv2dDirect(vk::Recorder& rec, const TensorView& x, const TensorView& w,
                  const TensorView* bias, const TensorView& y, const Conv2dParams& p) {
  const Shape want = conv2dShape(x.shape, w.shape, bias ? &bias->shape : nullptr, p);
  if (!(y.shape == want))
    throw ShapeError(describe("conv2dDirect", x.shape, w.shape, p) + ": y " + y.shape.str() +
                     " must be " + want.str());
  checkFloatOperand("conv2dDirect", "x", x);
  checkOperand("conv2dDirect", "w", w);
  if (bias) checkOperand("conv2dDirect", "bias", *bias);
  checkFloatOperand("conv2dDirect", "y", y);
  checkAlias("conv2dDirect", "y", y, "x", x, false);
  checkAlias("conv2dDirect", "y", y, "w", w, false);
  if (bias) checkAlias("conv2dDirect", "y", y, "bias", *bias, false);
  const Geometry G = geometry(x.shape, w.shape, want, p);
  vk::Context& ctx = rec.context();
  const Bound bx = bindStorage(ctx, x), bw = bindStorage(ctx, w), by = bindStorage(ctx, y);
  const Bound bb = bias ? bindStorage(ctx, *bias) : bw;  // a dummy the kernel never reads
  ConvPush pc = push(G, p, G.n, uint64_t(y.shape.numel()));
  pc.skip_a = bx.skip, pc.skip_b = bw.skip, pc.skip_c = by.skip, pc.skip_d = bb.skip;
  const vk::Kernel& k = floatKernel(
      ctx, "conv2d/direct", {{"local_size_x", workgroupSize(ctx)}, {"kBias", bias != nullptr}},
      {{"x_dtype", x.dtype},
       {"w_dtype", DType::F32},
       {"bias_dtype", DType::F32},
       {"y_dtype", y.dtype}});
  const vk::Arg args[] = {bx.arg, bw.arg, bb.arg, by.arg};
  grid(rec, k, args, pc);
}

namespace {

// The backward's shapes, formats and overlaps, before anything is recorded.
Geometry checkBackward(const char* op, const TensorView& x, const TensorView& w,
                       const TensorView& dy, const Conv2dGrads& grads, const TensorView& scratch,
                       const Conv2dParams& p) {
  const Geometry G = check(op, x, w, grads.dbias, dy.shape, scratch, p);
  checkFloatOperand(op, "dy", dy);
  const TensorView* outs[] = {grads.dx, grads.dw, grads.dbias, &scratch};
  const char* out_names[] = {"dx", "dw", "dbias", "scratch"};
  const TensorView* ins[] = {&x, &w, &dy};
  const char* in_names[] = {"x", "w", "dy"};
  for (int i = 0; i < 4; ++i) {
    if (!outs[i]) continue;
    for (int j = 0; j < 3; ++j) checkAlias(op, out_names[i], *outs[i], in_names[j], *ins[j], false);
    for (int j = i + 1; j < 4; ++j)
      if (outs[j]) checkAlias(op, out_names[i], *outs[i], out_names[j], *outs[j], false);
  }
  if (grads.dx) {
    if (!(grads.dx->shape == x.shape))
      throw ShapeError(describe(op, x.shape, w.shape, p) + ": dx " + grads.dx->shape.str() +
                       " must be " + x.shape.str());
    checkFloatOperand(op, "dx", *grads.dx);
  }
  if (grads.dw) {
    if (!(grads.dw->shape == w.shape))
      throw ShapeError(describe(op, x.shape, w.shape, p) + ": dw " + grads.dw->shape.str() +
                       " must be " + w.shape.str());
    checkOperand(op, "dw", *grads.dw);
  }
  return G;
}

// dbias (=|+=) dy summed per output channel, over every image at once (dy binds whole).
void biasGrad(vk::Recorder& rec, const Geometry& G, const Conv2dParams& p, const TensorView& dy,
              const TensorView& dbias, Write write) {
  vk::Context& ctx = rec.context();
  const Bound bd = bindStorage(ctx, dy), bb = bindStorage(ctx, dbias);
  ConvPush pc = push(G, p, G.n, uint64_t(G.o));
  pc.skip_a = bd.skip, pc.skip_b = bb.skip;
  const vk::Kernel& k = floatKernel(
      ctx, "conv2d/bias_grad",
      {{"local_size_x", workgroupSize(ctx)}, {"kAccumulate", write == Write::Accumulate}},
      {{"dy_dtype", dy.dtype}, {"dbias_dtype", DType::F32}});
  const vk::Arg args[] = {bd.arg, bb.arg};
  rec.dispatch(k, args, &pc, sizeof(pc), uint64_t(G.o));
}

}  // namespace

void conv2dBackward(vk::Recorder& rec, const TensorView& x, const TensorView& w,
                    const TensorView& dy, const Conv2dGrads& grads, const TensorView& scratch,
                    const Conv2dParams& p) {
  const char* op = "conv2dBackward";
  const Geometry G = checkBackward(op, x, w, dy, grads, scratch, p);
  if (grads.dbias) biasGrad(rec, G, p, dy, *grads.dbias, grads.dbias_write);
  vk::Context& ctx = rec.context();
  const uint32_t wgs = workgroupSize(ctx);
  if (!grads.dx && !grads.dw) return;

  const TensorView wg{w.buffer, w.offset, perGroup(G.g, G.o / G.g, G.taps()), DType::F32};
  const vk::Kernel& gather = floatKernel(ctx, "conv2d/gather", {{"local_size_x", wgs}},
                                         {{"dy_dtype", dy.dtype}, {"rows_dtype", DType::F32}});
  const int64_t step = chunkImages(G, x.shape, w.shape, scratch, p);
  for (int64_t n0 = 0; n0 < G.n; n0 += step) {
    const int64_t count = std::min(step, G.n - n0);
    const Chunk c = chunk(G, scratch, count);
    const TensorView dyc = images(dy, n0, count);
    {
      const Bound bd = bindStorage(ctx, dyc), br = bindStorage(ctx, c.rows);
      ConvPush pc = push(G, p, count, uint64_t(c.rows.shape.numel()));
      pc.skip_a = bd.skip, pc.skip_b = br.skip;
      const vk::Arg args[] = {bd.arg, br.arg};
      grid(rec, gather, args, pc);
    }
    if (grads.dw) {  // dw (=|+=) rowsᵀ · cols, every chunk after the first adding
      im2col(rec, G, p, images(x, n0, count), c.cols, count);
      const TensorView dwg{grads.dw->buffer, grads.dw->offset, wg.shape, DType::F32};
      MatmulOptions mo;
      mo.trans_a = true;
      mo.beta = n0 > 0 || grads.dw_write == Write::Accumulate ? 1.0f : 0.0f;
      matmul(rec, c.rows, c.cols, dwg, mo);
    }
    if (grads.dx) {  // dcols = rows · w over cols' bytes, then col2im
      matmul(rec, c.rows, wg, c.cols, MatmulOptions{});
      const TensorView dxc = images(*grads.dx, n0, count);
      const Bound bc = bindStorage(ctx, c.cols), bx = bindStorage(ctx, dxc);
      ConvPush pc = push(G, p, count, uint64_t(dxc.shape.numel()));
      pc.skip_a = bc.skip, pc.skip_b = bx.skip;
      const vk::Kernel& k =
          floatKernel(ctx, "conv2d/col2im",
                      {{"local_size_x", wgs}, {"kAccumulate", grads.dx_write == Write::Accumulate}},
                      {{"dcols_dtype", DType::F32}, {"dx_dtype", dxc.dtype}});
      const vk::Arg args[] = {bc.arg, bx.arg};
      grid(rec, k, args, pc);
    }
  }
}

}  // namespace vkgrad::ops
