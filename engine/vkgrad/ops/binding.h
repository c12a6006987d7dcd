// How a launcher binds a tensor view, and the checks launchers share.
//
// A binding has to start at the device's offset alignment (storage and texel), but a view may
// start at any multiple of 4 bytes. So the binding starts at the aligned offset at or below
// the view, and the kernel skips `skip` elements (a push constant).
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/ops/tensor.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {

// A view as a kernel binds it: from the device's binding alignment at or below its offset,
// so that any offset that is a multiple of 4 bytes works; skip is the view's first element
// inside the binding (in elements of its dtype).
struct Bound {
  vk::Arg arg;
  uint32_t skip = 0;
};
Bound bindStorage(const vk::Context& context, const TensorView& t);
// Where bindings may start: the device's storage and texel offset alignments, at least 16.
uint64_t bindingAlignment(const vk::Context& context);
Bound bindTexel(const vk::Context& context, const TensorView& t, vk::TexelFormat format);
// Whether t can be read through a texel view of that format: its components are t's element
// size (a 16-bit tensor fits only R16u and Rgba16u), a 4-component format needs t's first
// element on a texel boundary; every view must be within maxTexelBufferElements.
bool texelFits(const vk::Context& context, const TensorView& t, vk::TexelFormat format);
// How a kernel's TEXELS binding (shaders/common/storage.glsl) views a tensor of this dtype:
// in the f32 build R32F (or RGBA32F for vec4 fetches); in the ".s16" build, which any 16-bit
// tensor of the dispatch selects, unsigned words of the element's size, widened in the kernel.
// A u32 tensor (an index array) is viewed as its words, R32UI (RGBA32UI), in every build.
vk::TexelFormat texelFormat(DType dtype, bool vec4, bool s16);
// Kernels with a ".sb4" build (cmake/Shaders.cmake) take it where the device binds fewer
// storage buffers per stage than their usual build does (`needed`; Vulkan's minimum is 4).
bool fewerStorageBuffers(const vk::Context& context, uint32_t needed);
// A read-only input a kernel declares with FLOATS_OR_TEXELS (shaders/common/storage.glsl): its
// storage binding, or for the .sb4 build (`texels`) a one-component texel view in the
// kernel's format (texelFormat(t.dtype, false, s16)); the skip is the same. Throws Error
// naming the op, the input and maxTexelBufferElements where that view does not fit.
Bound bindInput(const vk::Context& context, const TensorView& t, bool texels, bool s16,
                const char* op, const char* name);
// The refusal bindInput throws: "<op>: <name> (shape) is read through a texel view where the
// device binds 4 storage buffers per stage ..., and needs N texels; <device> allows M
// (maxTexelBufferElements)".
std::string texelViewRefusal(const vk::Context& context, const std::string& op, const char* name,
                             const TensorView& t);
// Whether a kernel can store t 16 bytes at a time (its storage binding seen as vec4[]): t is
// f32 and its first element is a multiple of 4 elements into its binding.
bool vec4Storable(const vk::Context& context, const TensorView& t);
// Workgroups for a grid-stride kernel over `threads` invocations' work, capped (>= 1). On a
// CPU device each invocation takes up to 16 items (an invocation has a fixed cost there that
// one float or texel does not repay: elementwise kernels run 2x faster on lavapipe), keeping
// at least 4 workgroups per host thread where there is that much work.
uint32_t gridGroups(const vk::Context& context, uint64_t threads, uint32_t workgroup);
// Workgroups for a kernel whose workgroups grid-stride over `rows`, each of its lanes looping
// `steps_per_row` times per row: gridGroups(context, rows, 1), and on a CPU device at least
// enough that no lane loops more than kCpuLaneSteps times in all. llvmpipe ends an invocation
// after 65535 loop iterations, counted over all its loops, and keeps what it has: 16 rows of
// 32,768 logits on one workgroup of 8 lanes once gave NaN gradients without a word.
constexpr uint64_t kCpuLaneSteps = 32768;
uint32_t rowGroups(const vk::Context& context, uint64_t rows, uint64_t steps_per_row);
// The same for a kernel whose invocations grid-stride over `items`, each looping about
// `steps_per_item` times per item (an average where the host cannot know each item's count):
// gridGroups(context, items, workgroup), and on a CPU device at least enough that no lane
// loops more than kCpuLaneSteps times in all, up to one item per invocation. rowGroups is
// itemGroups(context, rows, 1, steps_per_row).
uint32_t itemGroups(const vk::Context& context, uint64_t items, uint32_t workgroup,
                    uint64_t steps_per_item);
// A 1-D kernel's workgroup: `preferred` invocations (a power of two), halved until the
// device allows it (Vulkan guarantees 128; a device profile may impose that).
uint32_t workgroupSize(const vk::DeviceInfo& info, uint32_t preferred = 256);
uint32_t workgroupSize(const vk::Context& context, uint32_t preferred = 256);
// Grid-stride kernels that never need more groups than this: far below every device's
// maxComputeWorkGroupCount[0] (>= 65535), and a few thousand invocations per core stay busy.
inline constexpr uint32_t kMaxStrideGroups = 4096;
// Workgroups of workgroupSize(context) for a grid-stride kernel over `invocations`, at most
// kMaxStrideGroups (the random streams and the embedding kernels: their bits depend on it).
uint32_t strideGroups(const vk::Context& context, uint64_t invocations);
// Whether the byte ranges of two views intersect (same buffer; empty views never do).
bool overlaps(const TensorView& x, const TensorView& y);
bool sameRange(const TensorView& x, const TensorView& y);
// checkFits (f32), plus at most 2^31 elements.
void checkOperand(const char* op, const char* name, const TensorView& t);
// The same for a kernel that takes any float format (ops/storage.h): f32, f16 or bf16.
void checkFloatOperand(const char* op, const char* name, const TensorView& t);
// Throws ShapeError when out sits on in's bytes in another format (f16 and bf16 views of the
// same bytes pass checkAlias's range test): "add: out (bf16) in place of a (f16) needs its
// dtype". An in-place kernel reads and writes each element in one format.
void checkInPlaceDtype(const char* op, const char* out_name, const TensorView& out,
                       const char* in_name, const TensorView& in);
// Throws unless out and in are disjoint, or (if allow_same) exactly the same elements.
void checkAlias(const char* op, const char* out_name, const TensorView& out, const char* in_name,
                const TensorView& in, bool allow_same);

}  // namespace vkgrad::ops
