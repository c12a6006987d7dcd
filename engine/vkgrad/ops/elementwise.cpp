#include "vkgrad/ops/elementwise.h"

#include <algorithm>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/reduce.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr vk::TexelFormat kRgba = vk::TexelFormat::Rgba32f;
constexpr vk::TexelFormat kR32 = vk::TexelFormat::R32f;

// The OP specialization constant of shaders/elementwise/binary.glsl.
enum class BinaryOp : uint32_t { Axpby = 0, Mul = 1, ScaleA = 2, ScaleB = 3 };

struct BinaryPush {
  uint32_t n;                         // elements of a and out
  uint32_t nb;                        // elements of b
  uint32_t div;                       // consecutive elements of a per b element (the view's inner)
  float alpha, beta;                  // coefficients of a and b
  uint32_t a_skip, b_skip, out_skip;  // first elements inside the bindings
};
static_assert(sizeof(BinaryPush) == 32);

struct BinaryBackwardPush {
  uint32_t n;                                            // elements of every operand
  float alpha, beta;                                     // the forward op's coefficients
  uint32_t dout_skip, a_skip, b_skip, da_skip, db_skip;  // first elements inside the bindings
};
static_assert(sizeof(BinaryBackwardPush) == 32);

std::string shapesOf(const TensorView& a, const char* symbol, const TensorView& b,
                     const TensorView& out) {
  return a.shape.str() + " " + symbol + " " + b.shape.str() + " -> " + out.shape.str();
}

// out (= or +=) op(a, b), b broadcast over a as f. a is not read by ScaleB, b not by ScaleA.
void recordBinary(vk::Recorder& rec, BinaryOp op, const TensorView& a, const TensorView& b,
                  const TensorView& out, KeptAxis f, float alpha, float beta, Write w) {
  const uint64_t n = uint64_t(f.numel());
  if (n == 0) return;
  vk::Context& ctx = rec.context();
  const bool reads_a = op != BinaryOp::ScaleB, reads_b = op != BinaryOp::ScaleA;
  const bool accumulate = w == Write::Accumulate;
  // b's indexing: same shape (i), a tile of whole rows (i % nb), or the general view.
  const uint32_t bcast = !reads_b || f.kept == f.numel() ? 0 : (f.inner == 1 ? 1 : 2);
  const vk::TexelFormat b_format = bcast == 0 ? kRgba : kR32;
  const bool texel = (!reads_a || texelFits(ctx, a, kRgba)) &&
                     (!reads_b || texelFits(ctx, b, b_format)) &&
                     (!accumulate || texelFits(ctx, out, kRgba)) && vec4Storable(ctx, out);
  // Operands a kernel does not read are bound to one it does (any valid binding serves).
  const TensorView& a_arg = reads_a ? a : b;
  const TensorView& b_arg = reads_b ? b : a;
  BinaryPush push{uint32_t(n), uint32_t(f.kept), uint32_t(f.inner), alpha, beta, 0, 0, 0};
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)},
                                    {"OP", uint32_t(op)},
                                    {"BCAST", bcast},
                                    {"ACCUMULATE", accumulate}};
  const vk::Kernel& kernel =
      texel
          ? ctx.kernels().get("elementwise/binary_texel", constants)
          : floatKernel(
                ctx, "elementwise/binary", constants,
                {{"a_dtype", a_arg.dtype}, {"b_dtype", b_arg.dtype}, {"result_dtype", out.dtype}});
  if (texel) {
    const auto ta = bindTexel(ctx, a_arg, reads_a ? kRgba : b_format);
    const auto tb = bindTexel(ctx, b_arg, reads_b ? b_format : kRgba);
    const auto tacc = accumulate ? bindTexel(ctx, out, kRgba) : ta;
    const auto so = bindStorage(ctx, out);
    push.a_skip = ta.skip, push.b_skip = tb.skip, push.out_skip = so.skip;
    const vk::Arg args[] = {ta.arg, tb.arg, tacc.arg, so.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(rec.context(), (n + 3) / 4, workgroupSize(rec.context())));
  } else {
    const auto sa = bindStorage(ctx, a_arg), sb = bindStorage(ctx, b_arg);
    const auto so = bindStorage(ctx, out);
    push.a_skip = sa.skip, push.b_skip = sb.skip, push.out_skip = so.skip;
    const vk::Arg args[] = {sa.arg, sb.arg, so.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(rec.context(), n, workgroupSize(rec.context())));
  }
}

// binary_backward's ".sb4" build, for a device that binds 4 storage buffers per stage: da and
// db in a dispatch each. Either may sit on an input (the one-pass kernel reads each element
// before it writes it), so the one whose output another dispatch still reads goes second.
void recordOneGradientEach(vk::Recorder& rec, vk::SpecConstants constants, BinaryBackwardPush push,
                           const TensorView& dout, const TensorView& a, const TensorView& b,
                           const TensorView& da, const TensorView& db, bool is_mul) {
  vk::Context& ctx = rec.context();
  // What each gradient's dispatch reads besides its own output.
  const auto clobbers = [&](const TensorView& out, const TensorView& other_reads) {
    return overlaps(out, dout) || (is_mul && overlaps(out, other_reads));
  };
  const bool da_first = !clobbers(da, a);  // db's dispatch reads dout and a
  if (!da_first && clobbers(db, b))
    throw Error(
        "binary backward: da and db each overwrite an input the other's dispatch reads, "
        "which a device that binds " +
        std::to_string(ctx.info().max_storage_buffers) +
        " storage buffers per stage cannot order (maxPerStageDescriptorStorageBuffers)");
  const auto sd = bindStorage(ctx, dout), sa = bindStorage(ctx, a), sb = bindStorage(ctx, b);
  push.dout_skip = sd.skip, push.a_skip = sa.skip, push.b_skip = sb.skip;
  for (const bool grad_b : {!da_first, da_first}) {
    const TensorView& out = grad_b ? db : da;
    const auto so = bindStorage(ctx, out);
    (grad_b ? push.db_skip : push.da_skip) = so.skip;
    vk::SpecConstants spec = constants;
    spec.push_back({"GRAD_B", grad_b});
    const vk::Kernel& kernel = floatKernel(ctx, "elementwise/binary_backward.sb4", spec,
                                           {{"dout_dtype", dout.dtype},
                                            {"a_dtype", a.dtype},
                                            {"b_dtype", b.dtype},
                                            {"grad_dtype", out.dtype}});
    const vk::Arg args[] = {sd.arg, sa.arg, sb.arg, so.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(ctx, uint64_t(push.n), workgroupSize(ctx)));
  }
}

// Both gradients of a same-shape op in one pass: OP 0 (a and b not read) or OP 1 (mul).
void recordBinaryBackward(vk::Recorder& rec, bool is_mul, const TensorView& a, const TensorView& b,
                          const TensorView& dout, const TensorView& da, const TensorView& db,
                          float beta, Write wa, Write wb) {
  const uint64_t n = uint64_t(dout.shape.numel());
  vk::Context& ctx = rec.context();
  const bool acc_a = wa == Write::Accumulate, acc_b = wb == Write::Accumulate;
  const auto fits = [&](const TensorView& t) { return texelFits(ctx, t, kRgba); };
  const bool texel = fits(dout) && (!is_mul || (fits(a) && fits(b))) && (!acc_a || fits(da)) &&
                     (!acc_b || fits(db)) && vec4Storable(ctx, da) && vec4Storable(ctx, db);
  const TensorView& a_arg = is_mul ? a : dout;
  const TensorView& b_arg = is_mul ? b : dout;
  const vk::SpecConstants constants{{"local_size_x", workgroupSize(ctx)},
                                    {"OP", is_mul ? 1u : 0u},
                                    {"ACCUMULATE_A", acc_a},
                                    {"ACCUMULATE_B", acc_b}};
  BinaryBackwardPush push{uint32_t(n), 1.0f, beta, 0, 0, 0, 0, 0};
  if (!texel && fewerStorageBuffers(ctx, 5)) {
    recordOneGradientEach(rec, constants, push, dout, a_arg, b_arg, da, db, is_mul);
    return;
  }
  const vk::Kernel& kernel = texel
                                 ? ctx.kernels().get("elementwise/binary_backward_texel", constants)
                                 : floatKernel(ctx, "elementwise/binary_backward", constants,
                                               {{"dout_dtype", dout.dtype},
                                                {"a_dtype", a_arg.dtype},
                                                {"b_dtype", b_arg.dtype},
                                                {"da_dtype", da.dtype},
                                                {"db_dtype", db.dtype}});
  if (texel) {
    const auto td = bindTexel(ctx, dout, kRgba), ta = bindTexel(ctx, a_arg, kRgba),
               tb = bindTexel(ctx, b_arg, kRgba);
    const auto tda = acc_a ? bindTexel(ctx, da, kRgba) : td;
    const auto tdb = acc_b ? bindTexel(ctx, db, kRgba) : td;
    const auto sda = bindStorage(ctx, da), sdb = bindStorage(ctx, db);
    push.dout_skip = td.skip, push.a_skip = ta.skip, push.b_skip = tb.skip;
    push.da_skip = sda.skip, push.db_skip = sdb.skip;
    const vk::Arg args[] = {td.arg, ta.arg, tb.arg, tda.arg, tdb.arg, sda.arg, sdb.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(rec.context(), (n + 3) / 4, workgroupSize(rec.context())));
  } else {
    const auto sd = bindStorage(ctx, dout), sa = bindStorage(ctx, a_arg),
               sb = bindStorage(ctx, b_arg), sda = bindStorage(ctx, da), sdb = bindStorage(ctx, db);
    push.dout_skip = sd.skip, push.a_skip = sa.skip, push.b_skip = sb.skip;
    push.da_skip = sda.skip, push.db_skip = sdb.skip;
    const vk::Arg args[] = {sd.arg, sa.arg, sb.arg, sda.arg, sdb.arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       gridGroups(rec.context(), n, workgroupSize(rec.context())));
  }
}

// a (op) b -> out with the checks every forward binary op shares.
void binaryForward(vk::Recorder& rec, const char* op, const char* symbol, BinaryOp kind,
                   const TensorView& a, const TensorView& b, const TensorView& out, float beta,
                   Write w) {
  if (!(out.shape == a.shape))
    throw ShapeError(std::string(op) + ": " + shapesOf(a, symbol, b, out) +
                     ": out must have a's shape");
  const KeptAxis f = broadcastAxes(op, a.shape, b.shape);
  checkFloatOperand(op, "a", a);
  checkFloatOperand(op, "b", b);
  checkFloatOperand(op, "out", out);
  checkAlias(op, "out", out, "a", a, true);
  checkAlias(op, "out", out, "b", b, true);  // same range only if b has a's shape
  checkInPlaceDtype(op, "out", out, "a", a);
  checkInPlaceDtype(op, "out", out, "b", b);
  recordBinary(rec, kind, a, b, out, f, 1.0f, beta, w);
}

bool wanted(const TensorView& grad) {
  return grad.buffer != nullptr;
}

// The gradients of out = alpha a + beta b (add, sub) or out = alpha a b (mul), b broadcast as f.
// a and b are only read by mul.
void binaryBackward(vk::Recorder& rec, const char* op, BinaryOp kind, const TensorView& a,
                    const TensorView& b, const TensorView& dout, const TensorView& da,
                    const TensorView& db, KeptAxis f, float beta, Write wa, Write wb) {
  const bool want_a = wanted(da), want_b = wanted(db);
  const bool is_mul = kind == BinaryOp::Mul;
  checkFloatOperand(op, "dout", dout);
  if (is_mul) {
    checkFloatOperand(op, "a", a);
    checkFloatOperand(op, "b", b);
  }
  if (want_a) checkFloatOperand(op, "da", da);
  if (want_b) checkFloatOperand(op, "db", db);
  const bool broadcast_b = f.kept != f.numel();
  if (want_a && want_b) checkAlias(op, "da", da, "db", db, false);
  struct Grad {
    const char* name;
    const TensorView* view;
    bool same_ok;  // may be exactly an input: false for a reduction's output, written while
                   // other invocations still read every input
  };
  for (const Grad& g : {Grad{"da", &da, true}, Grad{"db", &db, !broadcast_b}}) {
    if (!wanted(*g.view)) continue;
    checkAlias(op, g.name, *g.view, "dout", dout, g.same_ok);
    checkInPlaceDtype(op, g.name, *g.view, "dout", dout);
    if (is_mul) {
      checkAlias(op, g.name, *g.view, "a", a, g.same_ok);
      checkAlias(op, g.name, *g.view, "b", b, g.same_ok);
      checkInPlaceDtype(op, g.name, *g.view, "a", a);
      checkInPlaceDtype(op, g.name, *g.view, "b", b);
    }
  }
  if (f.numel() == 0) return;

  if (want_a && want_b && !broadcast_b) {  // both in one pass over dout
    recordBinaryBackward(rec, is_mul, a, b, dout, da, db, beta, wa, wb);
    return;
  }
  // db first: da may be dout or a itself, which the reduction still reads (the recorder puts
  // the barrier between them).
  if (want_b) {
    if (broadcast_b)
      sumOverKeptAxis(rec, op, dout, is_mul ? &a : nullptr, db, f, is_mul ? 1.0f : beta, wb);
    else if (is_mul)
      recordBinary(rec, BinaryOp::Mul, dout, a, db, {1, f.numel(), 1}, 1.0f, 0.0f, wb);
    else
      recordBinary(rec, BinaryOp::ScaleA, dout, dout, db, {1, f.numel(), 1}, beta, 0.0f, wb);
  }
  if (want_a) {
    if (is_mul)
      recordBinary(rec, BinaryOp::Mul, dout, b, da, f, 1.0f, 0.0f, wa);
    else
      recordBinary(rec, BinaryOp::ScaleA, dout, dout, da, {1, f.numel(), 1}, 1.0f, 0.0f, wa);
  }
}

void linearBackward(vk::Recorder& rec, const char* op, const TensorView& dout, const TensorView& da,
                    const TensorView& db, float beta, Write wa, Write wb) {
  if (wanted(da) && !(da.shape == dout.shape))
    throw ShapeError(std::string(op) + ": da " + da.shape.str() + " must have dout's shape " +
                     dout.shape.str());
  const KeptAxis f =
      wanted(db) ? broadcastAxes(op, dout.shape, db.shape) : KeptAxis{1, dout.shape.numel(), 1};
  binaryBackward(rec, op, BinaryOp::Axpby, dout, dout, dout, da, db, f, beta, wa, wb);
}

}  // namespace

KeptAxis broadcastAxes(const char* op, const Shape& a, const Shape& b) {
  const std::string shapes = std::string(op) + ": a " + a.str() + ", b " + b.str();
  const int ra = a.rank(), rb = b.rank(), lead = rb - ra;
  for (int i = 0; i < lead; ++i)
    if (b[i] != 1) throw ShapeError(shapes + ": b does not broadcast to a (b has more axes)");
  // Kept axes: b's size equals a's and is not 1. They must be one run among the axes of a
  // with size != 1 (size-1 axes of a are neutral either way).
  int first = -1, last = -1;
  bool gap = false;  // a broadcast axis seen after the first kept axis
  for (int i = 0; i < ra; ++i) {
    const int j = i + lead;
    const int64_t ai = a[i], bi = j >= 0 ? b[j] : 1;
    if (ai == 1 && bi == 1) continue;
    if (bi == ai) {
      if (gap) throw ShapeError(shapes + ": b's axes of a's size must be adjacent");
      if (first < 0) first = i;
      last = i;
    } else if (bi == 1) {
      gap = gap || first >= 0;
    } else {
      throw ShapeError(shapes + ": b does not broadcast to a (axis " + std::to_string(i) + ")");
    }
  }
  KeptAxis f;
  if (first < 0) {  // b is a single value
    f.inner = a.numel();
    return f;
  }
  for (int i = 0; i < ra; ++i) (i < first ? f.outer : i <= last ? f.kept : f.inner) *= a[i];
  return f;
}

bool broadcastsOver(const Shape& a, const Shape& b) {
  try {
    broadcastAxes("", a, b);
    return true;
  } catch (const ShapeError&) {
    return false;
  }
}

void add(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& out,
         Write w) {
  binaryForward(rec, "add", "+", BinaryOp::Axpby, a, b, out, 1.0f, w);
}

void sub(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& out,
         Write w) {
  binaryForward(rec, "sub", "-", BinaryOp::Axpby, a, b, out, -1.0f, w);
}

void mul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& out,
         Write w) {
  binaryForward(rec, "mul", "*", BinaryOp::Mul, a, b, out, 0.0f, w);
}

void scale(vk::Recorder& rec, const TensorView& x, const TensorView& y, float alpha, Write w) {
  if (!(x.shape == y.shape))
    throw ShapeError("scale: x " + x.shape.str() + " and y " + y.shape.str() +
                     " must have the same shape");
  checkFloatOperand("scale", "x", x);
  checkFloatOperand("scale", "y", y);
  checkAlias("scale", "y", y, "x", x, true);
  checkInPlaceDtype("scale", "y", y, "x", x);
  recordBinary(rec, BinaryOp::ScaleA, x, x, y, {1, x.shape.numel(), 1}, alpha, 0.0f, w);
}

void broadcast(vk::Recorder& rec, const TensorView& b, const TensorView& out, KeptAxis f,
               float alpha, Write w) {
  if (b.shape.numel() != f.kept || out.shape.numel() != f.numel())
    throw ShapeError("broadcast: b " + b.shape.str() + " -> out " + out.shape.str() +
                     " does not match the view (" + std::to_string(f.outer) + "," +
                     std::to_string(f.kept) + "," + std::to_string(f.inner) + ")");
  checkFloatOperand("broadcast", "b", b);
  checkFloatOperand("broadcast", "out", out);
  checkAlias("broadcast", "out", out, "b", b, true);
  checkInPlaceDtype("broadcast", "out", out, "b", b);
  recordBinary(rec, BinaryOp::ScaleB, b, b, out, f, 0.0f, alpha, w);
}

void addBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& da,
                 const TensorView& db, Write wa, Write wb) {
  linearBackward(rec, "addBackward", dout, da, db, 1.0f, wa, wb);
}

void subBackward(vk::Recorder& rec, const TensorView& dout, const TensorView& da,
                 const TensorView& db, Write wa, Write wb) {
  linearBackward(rec, "subBackward", dout, da, db, -1.0f, wa, wb);
}

void mulBackward(vk::Recorder& rec, const TensorView& a, const TensorView& b,
                 const TensorView& dout, const TensorView& da, const TensorView& db, Write wa,
                 Write wb) {
  const char* op = "mulBackward";
  if (!(dout.shape == a.shape))
    throw ShapeError(std::string(op) + ": dout " + dout.shape.str() + " must have a's shape " +
                     a.shape.str());
  if (wanted(da) && !(da.shape == a.shape))
    throw ShapeError(std::string(op) + ": da " + da.shape.str() + " must have a's shape " +
                     a.shape.str());
  if (wanted(db) && !(db.shape == b.shape))
    throw ShapeError(std::string(op) + ": db " + db.shape.str() + " must have b's shape " +
                     b.shape.str());
  const KeptAxis f = broadcastAxes(op, a.shape, b.shape);
  binaryBackward(rec, op, BinaryOp::Mul, a, b, dout, da, db, f, 0.0f, wa, wb);
}

void scaleBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx, float alpha,
                   Write w) {
  if (!(dx.shape == dy.shape))
    throw ShapeError("scaleBackward: dy " + dy.shape.str() + " and dx " + dx.shape.str() +
                     " must have the same shape");
  checkFloatOperand("scaleBackward", "dy", dy);
  checkFloatOperand("scaleBackward", "dx", dx);
  checkAlias("scaleBackward", "dx", dx, "dy", dy, true);
  checkInPlaceDtype("scaleBackward", "dx", dx, "dy", dy);
  recordBinary(rec, BinaryOp::ScaleA, dy, dy, dx, {1, dy.shape.numel(), 1}, alpha, 0.0f, w);
}

}  // namespace vkgrad::ops
