#include "vkgrad/ops/swiglu.h"

#include <span>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct SwigluPush {
  uint32_t n;                                                 // elements of y
  uint32_t f;                                                 // F
  uint32_t gate_stride, up_stride;                            // F, or 2F for gate_up
  uint32_t gate_skip, up_skip, y_skip, dgate_skip, dup_skip;  // y_skip: dy's in the backward
};
static_assert(sizeof(SwigluPush) == 36);

// Where gate and up lie: two tensors, or the halves of one gate_up.
struct Halves {
  TensorView gate, up;     // the bound tensors (both gate_up for the fused form)
  uint32_t stride = 0;     // row stride of each
  uint32_t up_offset = 0;  // elements from the bound up's first element to up's
};

Halves separate(const TensorView& gate, const TensorView& up) {
  return {gate, up, uint32_t(gate.shape.back()), 0};
}
Halves fused(const TensorView& gate_up) {
  const uint32_t f = uint32_t(gate_up.shape.back() / 2);
  return {gate_up, gate_up, 2 * f, f};
}

void checkSame(const char* op, const char* name, const TensorView& t, const Shape& s) {
  if (!(t.shape == s))
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " must be " + s.str());
}

void checkElements(const char* op, const Shape& s) {
  if (s.numel() > INT32_MAX) throw ShapeError(std::string(op) + ": more than 2^31 elements");
}

// The separate form's inputs: gate, up and `name` (y, or dy in the backward) of one shape,
// float views of at most 2^31 elements.
void checkSeparate(const char* op, const TensorView& gate, const TensorView& up, const char* name,
                   const TensorView& t) {
  checkSame(op, "up", up, gate.shape);
  checkSame(op, name, t, gate.shape);
  checkElements(op, gate.shape);
  checkFloatOperand(op, "gate", gate);
  checkFloatOperand(op, "up", up);
  checkFloatOperand(op, name, t);
}

// gate, up and y (dy in the backward) bound, and the push both kernels read; the backward
// adds its outputs' skips.
struct Bindings {
  Bound gate, up, y;
  SwigluPush push;
};
Bindings bindHalves(vk::Context& ctx, const Halves& h, const TensorView& y) {
  Bindings b{bindStorage(ctx, h.gate), bindStorage(ctx, h.up), bindStorage(ctx, y), {}};
  const uint32_t n = uint32_t(y.shape.numel()), f = uint32_t(y.shape.back());
  b.push = {n, f, h.stride, h.stride, b.gate.skip, b.up.skip + h.up_offset, b.y.skip, 0, 0};
  return b;
}

// One invocation per element of y.
void dispatch(vk::Recorder& rec, const vk::Kernel& kernel, std::span<const vk::Arg> args,
              const SwigluPush& push) {
  vk::Context& ctx = rec.context();
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(ctx, push.n, workgroupSize(ctx)));
}

void launchForward(vk::Recorder& rec, const Halves& h, const TensorView& y) {
  if (y.shape.numel() == 0) return;
  vk::Context& ctx = rec.context();
  const Bindings b = bindHalves(ctx, h, y);
  const vk::Kernel& kernel =
      floatKernel(ctx, "swiglu/forward", {{"local_size_x", workgroupSize(ctx)}},
                  {{"gate_dtype", h.gate.dtype}, {"up_dtype", h.up.dtype}, {"y_dtype", y.dtype}});
  const vk::Arg args[] = {b.gate.arg, b.up.arg, b.y.arg};
  dispatch(rec, kernel, args, b.push);
}

// dgate and dup bound like gate and up (the same gate_up gradient for the fused form).
void launchBackward(vk::Recorder& rec, const Halves& h, const TensorView& dy,
                    const TensorView& dgate, const TensorView& dup, Write gate_write,
                    Write up_write) {
  const bool want_gate = dgate.buffer != nullptr, want_up = dup.buffer != nullptr;
  if (dy.shape.numel() == 0 || (!want_gate && !want_up)) return;
  vk::Context& ctx = rec.context();
  Bindings b = bindHalves(ctx, h, dy);
  // An unwanted output's binding is a placeholder (the other output's), never touched.
  const Bound bdg = bindStorage(ctx, want_gate ? dgate : dup),
              bdu = bindStorage(ctx, want_up ? dup : dgate);
  b.push.dgate_skip = bdg.skip;
  b.push.dup_skip = bdu.skip + (want_up ? h.up_offset : 0);
  if (fewerStorageBuffers(ctx, 5)) {
    // gate, up, dy, dgate and dup: the ".sb4" build writes one gradient per dispatch.
    for (const bool gate : {true, false}) {
      if (!(gate ? want_gate : want_up)) continue;
      const vk::Kernel& kernel = floatKernel(ctx, "swiglu/backward.sb4",
                                             {{"local_size_x", workgroupSize(ctx)},
                                              {"kGate", gate},
                                              {"kUp", !gate},
                                              {"kAccumulateGate", gate_write == Write::Accumulate},
                                              {"kAccumulateUp", up_write == Write::Accumulate}},
                                             {{"gate_dtype", h.gate.dtype},
                                              {"up_dtype", h.up.dtype},
                                              {"dy_dtype", dy.dtype},
                                              {"dgate_dtype", gate ? dgate.dtype : dup.dtype}});
      const vk::Arg args[] = {b.gate.arg, b.up.arg, b.y.arg, gate ? bdg.arg : bdu.arg};
      dispatch(rec, kernel, args, b.push);
    }
    return;
  }
  const vk::Kernel& kernel = floatKernel(ctx, "swiglu/backward",
                                         {{"local_size_x", workgroupSize(ctx)},
                                          {"kGate", want_gate},
                                          {"kUp", want_up},
                                          {"kAccumulateGate", gate_write == Write::Accumulate},
                                          {"kAccumulateUp", up_write == Write::Accumulate}},
                                         {{"gate_dtype", h.gate.dtype},
                                          {"up_dtype", h.up.dtype},
                                          {"dy_dtype", dy.dtype},
                                          {"dgate_dtype", want_gate ? dgate.dtype : dup.dtype},
                                          {"dup_dtype", want_up ? dup.dtype : dgate.dtype}});
  const vk::Arg args[] = {b.gate.arg, b.up.arg, b.y.arg, bdg.arg, bdu.arg};
  dispatch(rec, kernel, args, b.push);
}

}  // namespace

Shape swigluFusedShape(const Shape& gate_up) {
  const std::string op = "swiglu: gate_up " + gate_up.str();
  if (gate_up.rank() < 1) throw ShapeError(op + " needs at least one dim");
  if (gate_up.back() < 2 || gate_up.back() % 2 != 0)
    throw ShapeError(op + " needs an even last axis (gate and up side by side)");
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i < gate_up.rank(); ++i) dims[i] = gate_up[i];
  dims[gate_up.rank() - 1] /= 2;
  return Shape::of(dims, gate_up.rank());
}

void swiglu(vk::Recorder& rec, const TensorView& gate, const TensorView& up, const TensorView& y) {
  const char* op = "swiglu";
  checkSeparate(op, gate, up, "y", y);
  checkAlias(op, "y", y, "gate", gate, true);
  checkAlias(op, "y", y, "up", up, true);
  checkInPlaceDtype(op, "y", y, "gate", gate);
  checkInPlaceDtype(op, "y", y, "up", up);
  launchForward(rec, separate(gate, up), y);
}

void swiglu(vk::Recorder& rec, const TensorView& gate_up, const TensorView& y) {
  const char* op = "swiglu";
  checkSame(op, "y", y, swigluFusedShape(gate_up.shape));
  checkElements(op, gate_up.shape);
  checkFloatOperand(op, "gate_up", gate_up);
  checkFloatOperand(op, "y", y);
  checkAlias(op, "y", y, "gate_up", gate_up, false);
  launchForward(rec, fused(gate_up), y);
}

void swigluBackward(vk::Recorder& rec, const TensorView& gate, const TensorView& up,
                    const TensorView& dy, const TensorView& dgate, const TensorView& dup,
                    Write gate_write, Write up_write) {
  const char* op = "swigluBackward";
  checkSeparate(op, gate, up, "dy", dy);
  for (const auto& [name, out] : {std::pair{"dgate", &dgate}, std::pair{"dup", &dup}}) {
    if (!out->buffer) continue;
    checkSame(op, name, *out, gate.shape);
    checkFloatOperand(op, name, *out);
    checkAlias(op, name, *out, "gate", gate, false);
    checkAlias(op, name, *out, "up", up, false);
    checkAlias(op, name, *out, "dy", dy, false);
  }
  checkAlias(op, "dgate", dgate, "dup", dup, false);
  launchBackward(rec, separate(gate, up), dy, dgate, dup, gate_write, up_write);
}

void swigluBackward(vk::Recorder& rec, const TensorView& gate_up, const TensorView& dy,
                    const TensorView& dgate_up, Write w) {
  const char* op = "swigluBackward";
  checkSame(op, "dy", dy, swigluFusedShape(gate_up.shape));
  checkSame(op, "dgate_up", dgate_up, gate_up.shape);
  checkElements(op, gate_up.shape);
  checkFloatOperand(op, "gate_up", gate_up);
  checkFloatOperand(op, "dy", dy);
  checkFloatOperand(op, "dgate_up", dgate_up);
  checkAlias(op, "dgate_up", dgate_up, "gate_up", gate_up, false);
  checkAlias(op, "dgate_up", dgate_up, "dy", dy, false);
  launchBackward(rec, fused(gate_up), dy, dgate_up, dgate_up, w, w);
}

}  // namespace vkgrad::ops
