// The fragment (tensor-core) attention kernels' choice and launch shape, for ops/attention.cpp:
// shaders/attention/fragment_forward.comp, fragment_backward_q.comp and
// fragment_backward_kv.comp, natively on VK_NV_cooperative_matrix or as their emulated builds
// (".emu", plain GLSL: lavapipe in CI). They take Q, K, V and dO stored f32 or f16, round
// them to fp16 and sum in fp32; bf16 keeps the SIMT kernels (fragments are fp16 only). The
// backward's dispatch order is shared with the SIMT shared-memory kernels.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "vkgrad/ops/attention.h"
#include "vkgrad/ops/attention_push.h"
#include "vkgrad/vk/spec_constants.h"

namespace vkgrad::vk {
class Context;
class Recorder;
struct Arg;
}  // namespace vkgrad::vk

namespace vkgrad::ops::detail {

enum class FragmentKernel { Forward, BackwardQ, BackwardKv };

// Whether the fragment kernels run for `variant` with head dim d and the operands the
// products read (q, k, v; and dout in the backward). Auto takes them where the device has
// cooperative matrices (never lavapipe), D is 16..128 in steps of 16, and the operands are
// f16, or f32 with ContextOptions::fp16_matmul (the precision policy of the Coopmat matmul).
// Fragment and FragmentEmulated throw (ShapeError for the head dim or a bf16 operand, Error
// naming the missing device features) where they cannot run; the other variants give false.
bool useFragment(const vk::Context& context, AttentionVariant variant, int64_t d,
                 std::initializer_list<const TensorView*> operands, const char* op);

// One fragment kernel's launch: its name (".emu" for the emulated build; floatKernel adds
// ".s16"), its spec constants (D, TILE, WARPS, SG), and the rows each workgroup owns. The
// warps per workgroup are the most of 4, 2, 1 that fit the device's shared memory and
// invocations.
struct FragmentLaunch {
  std::string name;
  vk::SpecConstants spec;
  uint32_t rows = 0;
};
FragmentLaunch fragmentLaunch(const vk::Context& context, bool emulated, FragmentKernel kernel,
                              int64_t d);

// The forward: args q, k, v, o, lse bound for storage (push holds their skips and strides),
// dtypes their formats in that order; R query rows per workgroup.
void recordFragmentForward(vk::Recorder& rec, const AttentionPush& push, const vk::Arg (&args)[5],
                           const DType (&dtypes)[5], int64_t d, bool emulated);

// The backward, FlashAttention-2's order: the row dots D = rowsum(dO∘O) first (the SIMT
// kernel, `tile` rows per workgroup: no products), then dK and dV (key rows per workgroup,
// query tiles in order) and dQ (query rows per workgroup), each sum in one workgroup: no
// atomics. args: q, k, v, dout, lse, rowdot, dq, dk, dv, o bound for storage.
void recordFragmentBackward(vk::Recorder& rec, const AttentionPush& push, const vk::Arg (&args)[10],
                            const BackwardTensors& t, int64_t d, uint32_t tile, bool emulated);

// The same three dispatches with the given dK/dV and dQ kernels (`rows` key or query rows per
// workgroup): recordFragmentBackward's, or the shared-memory kernels ops/attention.cpp
// launches (attention/backward_kv and backward_q, `tile` rows each). reads, when given: q,
// dout, lse and rowdot as the dK/dV kernel binds them and q, lse and rowdot as the dQ kernel
// does (texel views in the ".sb4" builds of a device with fewer storage buffers); else args'.
void recordBackwardKernels(vk::Recorder& rec, const AttentionPush& push, const vk::Arg (&args)[10],
                           const BackwardTensors& t, int64_t d, uint32_t tile,
                           const FragmentLaunch& kv, const FragmentLaunch& q,
                           const vk::Arg (*reads)[4] = nullptr);

}  // namespace vkgrad::ops::detail
