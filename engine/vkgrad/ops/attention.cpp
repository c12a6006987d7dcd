#include "vkgrad/ops/attention.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/attention_fragment.h"
#include "vkgrad/ops/attention_push.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

using detail::AttentionPush;
using detail::BackwardTensors;
using detail::Dims;
using detail::Slot;
using enum detail::Slot;

int64_t rowStride(const AttentionTensor& t) {
  return t.row_stride ? t.row_stride : t.view.shape[2] * t.view.shape[3];
}

// Checks one strided tensor against (b, t, h, d) and its buffer; the message names the op,
// the tensor, and both shapes.
void checkTensor(const char* op, const char* name, const AttentionTensor& t, int64_t b, int64_t tt,
                 int64_t h, int64_t d) {
  const Shape want{b, tt, h, d};
  if (!(t.view.shape == want))
    throw ShapeError(std::string(op) + ": " + name + " " + t.view.shape.str() + " must be " +
                     want.str() + " (B,T,H,D)");
  const int64_t stride = rowStride(t);
  if (stride < h * d)
    throw ShapeError(std::string(op) + ": " + name + " row stride " + std::to_string(stride) +
                     " is less than H*D = " + std::to_string(h * d));
  if (!t.view.buffer) throw ShapeError(std::string(op) + ": " + name + " has no buffer");
  if (!isFloat(t.view.dtype))
    throw ShapeError(std::string(op) + ": " + name + " must be f32, f16 or bf16, got " +
                     dtypeName(t.view.dtype));
  const uint64_t elements = uint64_t((b * tt - 1) * stride + h * d);
  const uint64_t size = dtypeBytes(t.view.dtype);
  if (t.view.offset % size != 0 || t.view.offset + size * elements > t.view.buffer->size())
    throw ShapeError(std::string(op) + ": " + name + " " + t.view.shape.str() +
                     " with row stride " + std::to_string(stride) + " needs " +
                     std::to_string(size * elements) + " bytes from offset " +
                     std::to_string(t.view.offset) + ", its buffer has " +
                     std::to_string(t.view.buffer->size()));
  if (elements > (uint64_t(1) << 31))
    throw ShapeError(std::string(op) + ": " + name + " spans more than 2^31 elements");
}

Dims checkForward(const char* op, const AttentionTensor& q, const AttentionTensor& k,
                  const AttentionTensor& v, const AttentionTensor& o, const TensorView& lse) {
  const Shape& qs = q.view.shape;
  const Shape lse_shape = attentionLseShape(qs, k.view.shape, v.view.shape, op);
  const Dims dims{qs[0], qs[2], qs[1], k.view.shape[1], qs[3], k.view.shape[2]};
  checkTensor(op, "q", q, dims.b, dims.tq, dims.h, dims.d);
  checkTensor(op, "k", k, dims.b, dims.tk, dims.hkv, dims.d);
  checkTensor(op, "v", v, dims.b, dims.tk, dims.hkv, dims.d);
  checkTensor(op, "o", o, dims.b, dims.tq, dims.h, dims.d);
  if (!(lse.shape == lse_shape))
    throw ShapeError(std::string(op) + ": lse " + lse.shape.str() + " must be " + lse_shape.str() +
                     " (B,H,Tq)");
  checkFloat(op, "lse", lse);
  return dims;
}

// Rows per tile: two tiles of TILE x D floats must fit the device's shared memory (with room
// to spare), and 64 rows are plenty.
uint32_t tileRows(const vk::Context& context, int64_t d) {
  const uint64_t shared = context.info().max_shared_memory;
  const uint64_t rows = (shared / 2) / (2 * uint64_t(d) * 4 + 8);
  return uint32_t(std::clamp<uint64_t>(rows, 1, 64));
}

AttentionPush makePush(const Dims& dims, const AttentionOptions& options) {
  AttentionPush push{};
  push.b = uint32_t(dims.b), push.h = uint32_t(dims.h);
  push.tq = uint32_t(dims.tq), push.tk = uint32_t(dims.tk);
  push.scale = options.scale != 0.0f ? options.scale : float(1.0 / std::sqrt(double(dims.d)));
  push.causal = options.causal ? 1 : 0;
  push.group = uint32_t(dims.h / dims.hkv);
  return push;
}

// t as one flat view over every element its rows span.
TensorView spanView(const AttentionTensor& t) {
  const Shape& s = t.view.shape;
  return {t.view.buffer, t.view.offset, Shape{(s[0] * s[1] - 1) * rowStride(t) + s[2] * s[3]},
          t.view.dtype};
}

bool canShuffle(const vk::DeviceInfo& info) {
  return info.subgroup_compute && info.subgroup_shuffle && info.subgroup_size > 0;
}

// Whether t can be read as 4-element texels: whole vec4 rows at vec4-aligned starts.
bool texelReadable(const vk::Context& context, const AttentionTensor& t) {
  return rowStride(t) % 4 == 0 &&
         texelFits(context, spanView(t), texelFormat(t.view.dtype, true, false));
}

// Whether any of the tensors is 16-bit: the texel kernels' ".s16" build.
bool anySixteen(std::initializer_list<const TensorView*> tensors) {
  bool s16 = false;
  for (const TensorView* t : tensors) s16 = s16 || t->dtype != DType::F32;
  return s16;
}

// Texel is for CPU devices: a workgroup of subgroup-size invocations is one subgroup there,
// and SIMD lanes share the fetched rows through shuffles. On a GPU the shared-memory tiles are
// faster (1.5-5x on an H100) and the backward's fully unrolled subgroup-wide tiles (32 lanes
// there) did not finish (BENCHMARKS.md, attention on the GPU), so Texel is refused there. It
// also needs D % 4 == 0, every fetched tensor readable as 4-element texels and the
// backward's LSE and row dots as 1-element ones, in any float format (a 16-bit tensor is
// fetched as 16-bit words and widened).
bool useTexel(const vk::Context& context, const Dims& dims, AttentionVariant variant,
              std::initializer_list<const AttentionTensor*> fetched,
              std::initializer_list<const TensorView*> scalars) {
  const vk::DeviceInfo& info = context.info();
  bool possible = info.isCpu() && canShuffle(info) && dims.d % 4 == 0;
  for (const AttentionTensor* t : fetched) possible = possible && texelReadable(context, *t);
  for (const TensorView* t : scalars)
    possible = possible && texelFits(context, *t, texelFormat(t->dtype, false, false));
  if (variant == AttentionVariant::Texel && !possible)
    throw Error(
        "attention: the texel variant needs a CPU device with subgroup shuffle, D a "
        "multiple of 4, and q, k, v (and dout) with row strides and starts on 4 elements, "
        "all within the device's texel buffer limits (the backward's LSE and row dots too)");
  return variant == AttentionVariant::Texel || (variant == AttentionVariant::Auto && possible);
}

// The shared-memory kernels give each invocation one query row (forward, dQ) or one key row
// (dK, dV) and loop over every key or query it meets, twice over D each (on lavapipe at D =
// 64: right at 400 keys, wrong at 500, without a word: llvmpipe ends an invocation after
// 65,535 loop iterations). On a CPU device they are refused past three quarters of that, by
// name; the Texel kernel (subgroup shuffle, D a multiple of 4) loops far less per key and ran
// 65,536 keys right there.
void checkSharedLoops(const vk::Context& context, const Dims& dims, const char* op) {
  const vk::DeviceInfo& info = context.info();
  if (!info.isCpu()) return;
  const int64_t group = dims.h / std::max<int64_t>(dims.hkv, 1);
  const int64_t rows = std::max(dims.tk, dims.tq * group), per_row = 2 * dims.d + 8;
  constexpr int64_t kBudget = 65535 * 3 / 4;
  if (rows * per_row > kBudget)
    throw Error(std::string(op) + ": the shared-memory kernel would loop over " +
                std::to_string(rows) + " rows of D = " + std::to_string(dims.d) +
                " in one invocation, more than " + info.name + " allows (" +
                std::to_string(kBudget / per_row) +
                " at this D: a CPU device ends an invocation after 65,535 loop iterations); the "
                "texel variant has no such limit there (it needs subgroup shuffle and D a "
                "multiple of 4)");
}

// Binds t (storage, or a 4-element texel view for the texel kernels' build: s16 or not) and
// records its skip and stride in slot.
vk::Arg bind(const vk::Context& context, AttentionPush& push, Slot slot, const AttentionTensor& t,
             bool texel = false, bool s16 = false) {
  const Bound bound = texel ? bindTexel(context, spanView(t), texelFormat(t.view.dtype, true, s16))
                            : bindStorage(context, spanView(t));
  push.skip[slot] = bound.skip;
  push.stride[slot] = uint32_t(rowStride(t));
  return bound.arg;
}

// Whether the tensors in slots are f32 and every row of them starts on 16 bytes of its
// binding (the texel kernels' STORE4), once they are bound.
bool rowsStartOnVec4(const AttentionPush& push, std::initializer_list<Slot> slots,
                     std::initializer_list<const TensorView*> tensors) {
  bool aligned = !anySixteen(tensors);
  for (Slot slot : slots)
    aligned = aligned && push.skip[slot] % 4 == 0 && push.stride[slot] % 4 == 0;
  return aligned;
}

}  // namespace

Shape attentionLseShape(const Shape& q, const Shape& k, const Shape& v, const char* op) {
  if (q.rank() != 4 || k.rank() != 4)
    throw ShapeError(std::string(op) + ": q " + q.str() + " and k " + k.str() +
                     " must be (B,T,H,D)");
  if (q.numel() == 0 || k.numel() == 0)
    throw ShapeError(std::string(op) + ": q " + q.str() + ", k " + k.str() +
                     ": every dim must be at least 1");
  if (q[3] > kMaxHeadDim)
    throw ShapeError(std::string(op) + ": head dim " + std::to_string(q[3]) +
                     " is above the supported " + std::to_string(kMaxHeadDim));
  // Grouped-query attention: k may have fewer heads than q, as long as they divide q's.
  if (k[2] > q[2] || q[2] % k[2] != 0)
    throw ShapeError(std::string(op) + ": q " + q.str() + " has " + std::to_string(q[2]) +
                     " heads and k " + k.str() + " " + std::to_string(k[2]) +
                     ": the key/value heads must divide the query heads");
  const Shape kv{q[0], k[1], k[2], q[3]};
  for (const auto& [name, t] : {std::pair{"k", &k}, std::pair{"v", &v}})
    if (!(*t == kv))
      throw ShapeError(std::string(op) + ": " + name + " " + t->str() + " must be " + kv.str() +
                       (k[2] == q[2] ? " (B,T,H,D)" : " (B,T,Hkv,D)"));
  return {q[0], q[2], q[1]};
}

const char* attentionVariantName(AttentionVariant variant) {
  switch (variant) {
    case AttentionVariant::Auto:
      return "auto";
    case AttentionVariant::Shared:
      return "shared";
    case AttentionVariant::Texel:
      return "texel";
    case AttentionVariant::Fragment:
      return "fragment";
    case AttentionVariant::FragmentEmulated:
      return "fragment-emulated";
  }
  return "?";
}

namespace {

// The LSE as the forward's .sb4 build writes it: an R32F storage texel view (the same skip as
// its storage binding); f32 only. Refused by name where it does not fit a texel view.
Bound bindLseImage(const vk::Context& context, const TensorView& lse) {
  if (!texelFits(context, lse, vk::TexelFormat::R32f))
    throw Error(texelViewRefusal(context, "attention", "lse", lse));
  return bindTexel(context, lse, vk::TexelFormat::R32f);
}

}  // namespace

void attention(vk::Recorder& rec, const AttentionTensor& q, const AttentionTensor& k,
               const AttentionTensor& v, const AttentionTensor& o, const TensorView& lse,
               const AttentionOptions& options) {
  const Dims dims = checkForward("attention", q, k, v, o, lse);
  vk::Context& context = rec.context();
  if (detail::useFragment(context, options.variant, dims.d, {&q.view, &k.view, &v.view},
                          "attention")) {
    AttentionPush push = makePush(dims, options);
    const Bound bl = bindStorage(context, lse);
    push.lse_skip = bl.skip;
    detail::recordFragmentForward(
        rec, push,
        {bind(context, push, kQ, q), bind(context, push, kK, k), bind(context, push, kV, v),
         bind(context, push, kO, o), bl.arg},
        {q.view.dtype, k.view.dtype, v.view.dtype, o.view.dtype, lse.dtype}, dims.d,
        options.variant == AttentionVariant::FragmentEmulated);
    return;
  }
  const bool texel = useTexel(context, dims, options.variant, {&q, &k, &v}, {});
  if (!texel) checkSharedLoops(context, dims, "attention");
  const bool s16 = anySixteen({&q.view, &k.view, &v.view, &o.view, &lse});
  const uint32_t tile = texel ? context.info().subgroup_size : tileRows(context, dims.d);
  AttentionPush push = makePush(dims, options);
  // q, k, v, o and lse: within 4 storage buffers the storage kernel's ".sb4" build writes the
  // (f32) LSE through a storage texel view.
  // A 16-bit LSE keeps the usual build, whose refusal names the limit.
  const bool four = !texel && fewerStorageBuffers(context, 5) && lse.dtype == DType::F32;
  const Bound bl = four ? bindLseImage(context, lse) : bindStorage(context, lse);
  push.lse_skip = bl.skip;
  const vk::Arg args[] = {
      bind(context, push, kQ, q, texel, s16), bind(context, push, kK, k, texel, s16),
      bind(context, push, kV, v, texel, s16), bind(context, push, kO, o), bl.arg};
  const vk::Kernel& kernel =
      texel ? floatKernel(context, "attention/forward_texel",
                          {{"D", uint32_t(dims.d)},
                           {"TILE", tile},
                           {"ACCUMULATE", false},
                           {"STORE4", rowsStartOnVec4(push, {kO}, {&o.view})}},
                          {{"Qt_dtype", q.view.dtype},
                           {"Kt_dtype", k.view.dtype},
                           {"Vt_dtype", v.view.dtype},
                           {"o_dtype", o.view.dtype},
                           {"lse_dtype", lse.dtype}})
      : four
          ? floatKernel(context, "attention/forward.sb4", {{"D", uint32_t(dims.d)}, {"TILE", tile}},
                        {{"q_dtype", q.view.dtype},
                         {"k_dtype", k.view.dtype},
                         {"v_dtype", v.view.dtype},
                         {"o_dtype", o.view.dtype}})
          : floatKernel(context, "attention/forward", {{"D", uint32_t(dims.d)}, {"TILE", tile}},
                        {{"q_dtype", q.view.dtype},
                         {"k_dtype", k.view.dtype},
                         {"v_dtype", v.view.dtype},
                         {"o_dtype", o.view.dtype},
                         {"lse_dtype", lse.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(push.tq, tile), push.h, push.b);
}

namespace {

// The texel kernels of attentionBackward: dQ first (its kernel also writes each row's dO · O),
// then dK and dV, which read the row dots and the LSE through one-element texels. args: q, k,
// v, dout (texel views), dq, dk, dv; lse and rowdot: their storage bindings; s16: some
// tensor is 16-bit (the kernels' ".s16" builds).
void recordBackwardTexel(vk::Recorder& rec, AttentionPush push, const vk::Arg (&args)[7],
                         const vk::Arg& lse_arg, const vk::Arg& rowdot_arg,
                         const BackwardTensors& t, bool s16, uint32_t tile, const Dims& dims,
                         Write w) {
  vk::Context& context = rec.context();
  const auto& [aq, ak, av, ado, adq, adk, adv] = args;
  const vk::SpecConstants spec = {
      {"D", uint32_t(dims.d)},
      {"TILE", tile},
      {"ACCUMULATE", w == Write::Accumulate},
      {"STORE4", rowsStartOnVec4(push, {kDQ, kDK, kDV}, {&t.dq.view, &t.dk.view, &t.dv.view})}};
  const vk::Arg q_args[] = {aq,      ak,         av,  ado,
                            lse_arg, rowdot_arg, adq, bind(context, push, kO, t.o, true, s16)};
  rec.dispatchGroups(floatKernel(context, "attention/backward_q_texel", spec,
                                 {{"Qt_dtype", t.q.view.dtype},
                                  {"Kt_dtype", t.k.view.dtype},
                                  {"Vt_dtype", t.v.view.dtype},
                                  {"DOt_dtype", t.dout.view.dtype},
                                  {"lse_dtype", t.lse.dtype},
                                  {"rowdot_dtype", t.rowdot.dtype},
                                  {"dq_dtype", t.dq.view.dtype},
                                  {"Ot_dtype", t.o.view.dtype}}),
                     q_args, &push, sizeof(push), vk::divUp(push.tq, tile), push.h, push.b);
  const Bound tl = bindTexel(context, t.lse, texelFormat(t.lse.dtype, false, s16)),
              tr = bindTexel(context, t.rowdot, texelFormat(t.rowdot.dtype, false, s16));
  push.lse_skip = tl.skip;
  push.rowdot_skip = tr.skip;
  const vk::Arg kv_args[] = {aq, ak, av, ado, tl.arg, tr.arg, adk, adv};
  rec.dispatchGroups(floatKernel(context, "attention/backward_kv_texel", spec,
                                 {{"Qt_dtype", t.q.view.dtype},
                                  {"Kt_dtype", t.k.view.dtype},
                                  {"Vt_dtype", t.v.view.dtype},
                                  {"DOt_dtype", t.dout.view.dtype},
                                  {"Lt_dtype", t.lse.dtype},
                                  {"Rt_dtype", t.rowdot.dtype},
                                  {"dk_dtype", t.dk.view.dtype},
                                  {"dv_dtype", t.dv.view.dtype}}),
                     kv_args, &push, sizeof(push), vk::divUp(push.tk, tile), uint32_t(dims.hkv),
                     push.b);
}

}  // namespace

int64_t attentionBackwardScratch(const AttentionTensor& q) {
  const Shape& s = q.view.shape;
  return s.rank() == 4 ? s[0] * s[2] * s[1] : 0;
}

void attentionBackward(vk::Recorder& rec, const AttentionTensor& q, const AttentionTensor& k,
                       const AttentionTensor& v, const AttentionTensor& o, const TensorView& lse,
                       const AttentionTensor& dout, const AttentionTensor& dq,
                       const AttentionTensor& dk, const AttentionTensor& dv,
                       const TensorView& scratch, const AttentionOptions& options, Write w) {
  const char* op = "attentionBackward";
  const Dims dims = checkForward(op, q, k, v, o, lse);
  checkTensor(op, "dout", dout, dims.b, dims.tq, dims.h, dims.d);
  checkTensor(op, "dq", dq, dims.b, dims.tq, dims.h, dims.d);
  checkTensor(op, "dk", dk, dims.b, dims.tk, dims.hkv, dims.d);
  checkTensor(op, "dv", dv, dims.b, dims.tk, dims.hkv, dims.d);
  const int64_t rows = dims.b * dims.h * dims.tq;
  if (scratch.shape.numel() < rows)
    throw ShapeError(std::string(op) + ": scratch " + scratch.shape.str() + " needs at least " +
                     std::to_string(rows) + " elements");
  // The row dots are stored in the scratch's format.
  const TensorView rowdot{scratch.buffer, scratch.offset, Shape{rows}, scratch.dtype};
  checkFloat(op, "scratch", rowdot);

  vk::Context& context = rec.context();
  const bool fragment = detail::useFragment(context, options.variant, dims.d,
                                            {&q.view, &k.view, &v.view, &dout.view}, op);
  const bool texel = !fragment && useTexel(context, dims, options.variant, {&q, &k, &v, &dout, &o},
                                           {&lse, &rowdot});
  if (!fragment && !texel) checkSharedLoops(context, dims, op);
  const bool s16 = anySixteen({&q.view, &k.view, &v.view, &o.view, &dout.view, &dq.view, &dk.view,
                               &dv.view, &lse, &rowdot});
  const uint32_t tile = texel ? context.info().subgroup_size : tileRows(context, dims.d);
  AttentionPush push = makePush(dims, options);
  push.accumulate = w == Write::Accumulate ? 1 : 0;
  const Bound bl = bindStorage(context, lse), br = bindStorage(context, rowdot);
  push.lse_skip = bl.skip;
  push.rowdot_skip = br.skip;
  const vk::Arg ao = bind(context, push, kO, o), adq = bind(context, push, kDQ, dq),
                adk = bind(context, push, kDK, dk), adv = bind(context, push, kDV, dv);
  const vk::Arg aq = bind(context, push, kQ, q, texel, s16),
                ak = bind(context, push, kK, k, texel, s16),
                av = bind(context, push, kV, v, texel, s16),
                ado_read = bind(context, push, kDO, dout, texel, s16);
  const BackwardTensors tensors{q, k, v, o, dout, dq, dk, dv, lse, rowdot};
  if (texel) {
    recordBackwardTexel(rec, push, {aq, ak, av, ado_read, adq, adk, adv}, bl.arg, br.arg, tensors,
                        s16, tile, dims, w);
    return;
  }
  const vk::Arg args[] = {aq, ak, av, ado_read, bl.arg, br.arg, adq, adk, adv, ao};
  if (fragment) {
    detail::recordFragmentBackward(rec, push, args, tensors, dims.d, tileRows(context, dims.d),
                                   options.variant == AttentionVariant::FragmentEmulated);
    return;
  }
  // The kernels bind up to 8 storage buffers; within fewer their ".sb4" builds read q, the LSE
  // and the row dots (and in the dK/dV kernel dout) through one-component texel views, which
  // keep the storage bindings' skips.
  const bool four = fewerStorageBuffers(context, 8);
  auto input = [&](const TensorView& t, const char* name, const vk::Arg& storage) {
    return four ? bindInput(context, t, true, s16, op, name).arg : storage;
  };
  const vk::Arg reads[] = {input(spanView(q), "q", aq), input(spanView(dout), "dout", ado_read),
                           input(lse, "lse", bl.arg), input(rowdot, "rowdot", br.arg)};
  const vk::SpecConstants spec = {{"D", uint32_t(dims.d)}, {"TILE", tile}};
  detail::recordBackwardKernels(
      rec, push, args, tensors, dims.d, tile,
      {four ? "attention/backward_kv.sb4" : "attention/backward_kv", spec, tile},
      {four ? "attention/backward_q.sb4" : "attention/backward_q", spec, tile}, &reads);
}

}  // namespace vkgrad::ops
