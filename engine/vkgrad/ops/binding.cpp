#include "vkgrad/ops/binding.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <thread>

#include "vkgrad/core/error.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {

// One alignment for storage and texel bindings, and at least 16 bytes so that an RGBA32F
// view's texels line up with the view's elements.
uint64_t bindingAlignment(const vk::Context& context) {
  const vk::DeviceInfo& info = context.info();
  return std::max<uint64_t>(
      {16, info.min_storage_offset_alignment, info.min_texel_offset_alignment});
}

Bound bindStorage(const vk::Context& context, const TensorView& t) {
  const uint64_t lead = (t.buffer->offset() + t.offset) % bindingAlignment(context);
  return {vk::Arg(*t.buffer, t.offset - lead, lead + t.bytes()),
          uint32_t(lead / dtypeBytes(t.dtype))};
}

Bound bindTexel(const vk::Context& context, const TensorView& t, vk::TexelFormat format) {
  const uint64_t lead = (t.buffer->offset() + t.offset) % bindingAlignment(context);
  return {vk::Arg(*t.buffer, t.offset - lead, lead + t.bytes(), format),
          uint32_t(lead / dtypeBytes(t.dtype))};
}

bool fewerStorageBuffers(const vk::Context& context, uint32_t needed) {
  return context.info().max_storage_buffers < needed;
}

Bound bindInput(const vk::Context& context, const TensorView& t, bool texels, bool s16,
                const char* op, const char* name) {
  if (!texels) return bindStorage(context, t);
  const vk::TexelFormat format = texelFormat(t.dtype, false, s16);
  if (!texelFits(context, t, format)) throw Error(texelViewRefusal(context, op, name, t));
  return bindTexel(context, t, format);
}

std::string texelViewRefusal(const vk::Context& context, const std::string& op, const char* name,
                             const TensorView& t) {
  const vk::DeviceInfo& info = context.info();
  return op + ": " + name + " " + t.shape.str() + " is read through a texel view where the " +
         "device binds " + std::to_string(info.max_storage_buffers) +
         " storage buffers per stage (maxPerStageDescriptorStorageBuffers), and needs " +
         std::to_string(t.shape.numel()) + " texels; " + info.label() + " allows " +
         std::to_string(info.max_texel_buffer_elements) + " (maxTexelBufferElements)";
}

bool texelFits(const vk::Context& context, const TensorView& t, vk::TexelFormat format) {
  // One component per element: 32-bit formats for f32 and u32, 16-bit ones for f16 and bf16.
  if (dtypeBytes(t.dtype) != vk::texelComponentBytes(format)) return false;
  const uint64_t lead = (t.buffer->offset() + t.offset) % bindingAlignment(context);
  const uint64_t texel = vk::texelBytes(format);
  if (lead % texel != 0) return false;
  // texelFetch takes an int, whatever maxTexelBufferElements allows.
  const uint64_t limit = std::min<uint64_t>(context.info().max_texel_buffer_elements, INT32_MAX);
  return (lead + t.bytes() + texel - 1) / texel <= limit;
}

vk::TexelFormat texelFormat(DType dtype, bool vec4, bool s16) {
  if (dtype == DType::U32) return vec4 ? vk::TexelFormat::Rgba32u : vk::TexelFormat::R32u;
  if (dtype != DType::F32) return vec4 ? vk::TexelFormat::Rgba16u : vk::TexelFormat::R16u;
  if (s16) return vec4 ? vk::TexelFormat::Rgba32u : vk::TexelFormat::R32u;
  return vec4 ? vk::TexelFormat::Rgba32f : vk::TexelFormat::R32f;
}

bool vec4Storable(const vk::Context& context, const TensorView& t) {
  return t.dtype == DType::F32 && bindStorage(context, t).skip % 4 == 0;
}

uint32_t gridGroups(const vk::Context& context, uint64_t threads, uint32_t workgroup) {
  // Enough invocations to fill any current GPU; beyond that each one loops. 65535 is the
  // smallest maxComputeWorkGroupCount[0] Vulkan allows.
  constexpr uint64_t kMaxGroups = 8192;
  uint64_t groups = (threads + workgroup - 1) / workgroup;
  if (context.info().isCpu()) {
    // lavapipe runs workgroups on as many threads as the host has (LP_NUM_THREADS).
    static const uint64_t kMinGroups = 4 * std::max(1u, std::thread::hardware_concurrency());
    constexpr uint64_t kItemsPerInvocation = 16;
    groups =
        std::max(std::min(groups, kMinGroups), (threads + workgroup * kItemsPerInvocation - 1) /
                                                   (workgroup * kItemsPerInvocation));
  }
  return uint32_t(std::clamp<uint64_t>(groups, 1, kMaxGroups));
}

uint32_t itemGroups(const vk::Context& context, uint64_t items, uint32_t workgroup,
                    uint64_t steps_per_item) {
  uint64_t groups = gridGroups(context, items, workgroup);
  if (context.info().isCpu()) {
    // 65535 workgroups is Vulkan's smallest maxComputeWorkGroupCount[0]; one item per
    // invocation there is the most this can do (a single item past the budget is the caller's
    // to refuse).
    const uint64_t lanes = (items * steps_per_item + kCpuLaneSteps - 1) / kCpuLaneSteps;
    const uint64_t needed = (lanes + workgroup - 1) / workgroup;
    groups =
        std::min<uint64_t>({std::max(groups, needed), (items + workgroup - 1) / workgroup, 65535});
  }
  return uint32_t(std::max<uint64_t>(groups, 1));
}

uint32_t rowGroups(const vk::Context& context, uint64_t rows, uint64_t steps_per_row) {
  return itemGroups(context, rows, 1, steps_per_row);
}

uint32_t strideGroups(const vk::Context& context, uint64_t invocations) {
  return uint32_t(
      std::min<uint64_t>(vk::divUp(invocations, workgroupSize(context)), kMaxStrideGroups));
}

uint32_t workgroupSize(const vk::DeviceInfo& info, uint32_t preferred) {
  uint32_t size = preferred;
  while (size > 1 && (size > info.max_workgroup_invocations || size > info.max_workgroup_size[0]))
    size /= 2;
  return size;
}

uint32_t workgroupSize(const vk::Context& context, uint32_t preferred) {
  return workgroupSize(context.info(), preferred);
}

bool overlaps(const TensorView& x, const TensorView& y) {
  if (!x.buffer || !y.buffer || x.buffer != y.buffer) return false;
  return x.offset < y.offset + y.bytes() && y.offset < x.offset + x.bytes();
}

bool sameRange(const TensorView& x, const TensorView& y) {
  return x.buffer == y.buffer && x.offset == y.offset && x.bytes() == y.bytes();
}

void checkOperand(const char* op, const char* name, const TensorView& t) {
  checkFits(op, name, t);
  if (t.shape.numel() > (int64_t(1) << 31))
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() +
                     " has more than 2^31 elements");
}

void checkFloatOperand(const char* op, const char* name, const TensorView& t) {
  checkFloat(op, name, t);
  if (t.shape.numel() > (int64_t(1) << 31))
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() +
                     " has more than 2^31 elements");
}

void checkInPlaceDtype(const char* op, const char* out_name, const TensorView& out,
                       const char* in_name, const TensorView& in) {
  if (out.dtype != in.dtype && overlaps(out, in))
    throw ShapeError(std::string(op) + ": " + out_name + " (" + dtypeName(out.dtype) +
                     ") in place of " + in_name + " (" + dtypeName(in.dtype) + ") needs its dtype");
}

void checkAlias(const char* op, const char* out_name, const TensorView& out, const char* in_name,
                const TensorView& in, bool allow_same) {
  if (!overlaps(out, in) || (allow_same && sameRange(out, in))) return;
  throw ShapeError(std::string(op) + ": " + out_name + " " + out.shape.str() + " overlaps " +
                   in_name + " " + in.shape.str() +
                   (allow_same ? " (only exactly the same elements may alias)" : ""));
}

}  // namespace vkgrad::ops
