#include "vkgrad/ops/attention_fragment.h"

#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops::detail {
namespace {

// The emulated fragment layer's virtual warp (shaders/common/fragment.glsl).
constexpr uint32_t kEmulatedWarp = 32;

// Bytes of shared memory a kernel declares with `warps` warps (attention/fragment_tiles.glsl
// and the kernel's own arrays; R = 16·warps rows per tile, rows of D halves padded by 8).
uint64_t sharedBytes(FragmentKernel kernel, uint64_t warps, uint64_t d, bool emulated) {
  const uint64_t r = 16 * warps;
  const uint64_t scores = warps * 16 * r * 4, halves = warps * 16 * (r + 8) * 2;
  uint64_t bytes = 2 * r * (d + 8) * 2 + scores + warps * 16 * 4;  // Xs, Ys, Ss, rowf
  switch (kernel) {
    case FragmentKernel::Forward:
      bytes += halves + (emulated ? 0 : warps * 512);  // Ps; the coordinate hook's slices
      break;
    case FragmentKernel::BackwardQ:
      bytes += scores + halves;  // DPs, Gs
      break;
    case FragmentKernel::BackwardKv:
      bytes += scores + 2 * halves + 2 * r * 4;  // DPs, Ps, Gs, ls, rs
      break;
  }
  return bytes + (emulated ? warps * 1024 : 0);  // the emulated layer's scratch
}

}  // namespace

bool useFragment(const vk::Context& context, AttentionVariant variant, int64_t d,
                 std::initializer_list<const TensorView*> operands, const char* op) {
  const vk::DeviceInfo& info = context.info();
  const bool explicit_variant =
      variant == AttentionVariant::Fragment || variant == AttentionVariant::FragmentEmulated;
  if (!explicit_variant && variant != AttentionVariant::Auto) return false;
  const bool shape = d % 16 == 0 && d >= 16 && d <= 128;
  bool formats = true, half = false;
  for (const TensorView* t : operands) {
    formats = formats && (t->dtype == DType::F32 || t->dtype == DType::F16);
    half = half || t->dtype == DType::F16;
  }
  // A native warp's lanes 0..15 own a row each in the row-wise work.
  const bool native = info.coopmat && info.subgroup_size >= 16;
  if (variant == AttentionVariant::Auto)
    return native && shape && formats && (half || context.fp16Matmul());
  const std::string name = std::string(op) + ": the " + attentionVariantName(variant) + " variant";
  if (!shape)
    throw ShapeError(name + " needs a head dim from 16 to 128 in steps of 16, got " +
                     std::to_string(d));
  if (!formats)
    throw ShapeError(name +
                     " reads q, k, v and dout in f32 or f16 (fragments are fp16); "
                     "the shared and texel variants take bf16");
  if (variant == AttentionVariant::FragmentEmulated) {
    if (!info.fp16 || !info.storage_16bit)
      throw Error(name +
                  " needs shaderFloat16 (fp16 arithmetic) and storageBuffer16BitAccess "
                  "(16-bit storage), which " +
                  info.label() + " does not offer");
    return true;
  }
  if (!native)
    throw Error(name +
                " needs cooperative matrices (VK_NV_cooperative_matrix with a 16x16x16 "
                "fp16 x fp16 + fp32 subgroup shape, fp16 arithmetic, 16-bit storage, the "
                "Vulkan memory model and a fixed subgroup size of 16 or more), which " +
                info.name + " lacks");
  return true;
}

FragmentLaunch fragmentLaunch(const vk::Context& context, bool emulated, FragmentKernel kernel,
                              int64_t d) {
  const vk::DeviceInfo& info = context.info();
  const uint32_t lanes = emulated ? kEmulatedWarp : info.subgroup_size;
  uint32_t warps = 4;
  while (warps > 1 && (sharedBytes(kernel, warps, uint64_t(d), emulated) > info.max_shared_memory ||
                       warps * lanes > info.max_workgroup_invocations))
    warps /= 2;
  if (sharedBytes(kernel, warps, uint64_t(d), emulated) > info.max_shared_memory)
    throw Error("attention: the fragment kernels need " +
                std::to_string(sharedBytes(kernel, warps, uint64_t(d), emulated)) +
                " bytes of shared memory at head dim " + std::to_string(d) + ", " + info.name +
                " has " + std::to_string(info.max_shared_memory));
  const char* base = kernel == FragmentKernel::Forward     ? "attention/fragment_forward"
                     : kernel == FragmentKernel::BackwardQ ? "attention/fragment_backward_q"
                                                           : "attention/fragment_backward_kv";
  return {std::string(base) + (emulated ? ".emu" : ""),
          {{"D", uint32_t(d)}, {"TILE", warps * lanes}, {"WARPS", warps}, {"SG", lanes}},
          16 * warps};
}

void recordFragmentForward(vk::Recorder& rec, const AttentionPush& push, const vk::Arg (&args)[5],
                           const DType (&dtypes)[5], int64_t d, bool emulated) {
  vk::Context& context = rec.context();
  const FragmentLaunch launch = fragmentLaunch(context, emulated, FragmentKernel::Forward, d);
  const vk::Kernel& kernel = floatKernel(context, launch.name, launch.spec,
                                         {{"q_dtype", dtypes[0]},
                                          {"k_dtype", dtypes[1]},
                                          {"v_dtype", dtypes[2]},
                                          {"o_dtype", dtypes[3]},
                                          {"lse_dtype", dtypes[4]}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(push.tq, launch.rows), push.h,
                     push.b);
}

void recordBackwardKernels(vk::Recorder& rec, const AttentionPush& push, const vk::Arg (&args)[10],
                           const BackwardTensors& t, int64_t d, uint32_t tile,
                           const FragmentLaunch& kv, const FragmentLaunch& q,
                           const vk::Arg (*reads)[4]) {
  vk::Context& context = rec.context();
  const auto& [aq, ak, av, ado, al, ar, adq, adk, adv, ao] = args;
  const vk::Arg& rq = reads ? (*reads)[0] : aq;
  const vk::Arg& rdo = reads ? (*reads)[1] : ado;
  const vk::Arg& rl = reads ? (*reads)[2] : al;
  const vk::Arg& rr = reads ? (*reads)[3] : ar;
  const vk::Arg rowdot_args[] = {ao, ado, ar};
  rec.dispatchGroups(
      floatKernel(context, "attention/backward_rowdot", {{"D", uint32_t(d)}, {"TILE", tile}},
                  {{"o_dtype", t.o.view.dtype},
                   {"dout_dtype", t.dout.view.dtype},
                   {"rowdot_dtype", t.rowdot.dtype}}),
      rowdot_args, &push, sizeof(push), vk::divUp(push.tq, tile), push.h, push.b);
  // One workgroup per key tile and key/value head: it sums over the head's query heads.
  const vk::Arg kv_args[] = {rq, ak, av, rdo, rl, rr, adk, adv};
  rec.dispatchGroups(floatKernel(context, kv.name, kv.spec,
                                 {{"q_dtype", t.q.view.dtype},
                                  {"k_dtype", t.k.view.dtype},
                                  {"v_dtype", t.v.view.dtype},
                                  {"dout_dtype", t.dout.view.dtype},
                                  {"lse_dtype", t.lse.dtype},
                                  {"rowdot_dtype", t.rowdot.dtype},
                                  {"dk_dtype", t.dk.view.dtype},
                                  {"dv_dtype", t.dv.view.dtype}}),
                     kv_args, &push, sizeof(push), vk::divUp(push.tk, kv.rows), push.h / push.group,
                     push.b);
  const vk::Arg q_args[] = {rq, ak, av, ado, rl, rr, adq};  // dout: storage in both builds
  rec.dispatchGroups(floatKernel(context, q.name, q.spec,
                                 {{"q_dtype", t.q.view.dtype},
                                  {"k_dtype", t.k.view.dtype},
                                  {"v_dtype", t.v.view.dtype},
                                  {"dout_dtype", t.dout.view.dtype},
                                  {"lse_dtype", t.lse.dtype},
                                  {"rowdot_dtype", t.rowdot.dtype},
                                  {"dq_dtype", t.dq.view.dtype}}),
                     q_args, &push, sizeof(push), vk::divUp(push.tq, q.rows), push.h, push.b);
}

void recordFragmentBackward(vk::Recorder& rec, const AttentionPush& push, const vk::Arg (&args)[10],
                            const BackwardTensors& t, int64_t d, uint32_t tile, bool emulated) {
  vk::Context& context = rec.context();
  // Both launches are sized before anything is recorded: either may refuse the device.
  const FragmentLaunch kv = fragmentLaunch(context, emulated, FragmentKernel::BackwardKv, d);
  const FragmentLaunch q = fragmentLaunch(context, emulated, FragmentKernel::BackwardQ, d);
  recordBackwardKernels(rec, push, args, t, d, tile, kv, q);
}

}  // namespace vkgrad::ops::detail
