#include "vkgrad/vk/kernel_fit.h"

#include <algorithm>
#include <iterator>
#include <map>

#include "vkgrad/vk/error.h"
#include "vkgrad/vk/spirv_words.h"

namespace vkgrad::vk {
namespace {

using namespace spirv;  // the SPIR-V numbers by name (vk/spirv_words.h)

// The operations glslang emits in OpSpecConstantOp for array lengths (gl_WorkGroupSize.x,
// BK * (BM + 1), ...): SPIR-V opcodes (section 3.52) of their own, used only here.
enum : uint32_t {
  kCompositeExtract = 81,
  kSNegate = 126,
  kIAdd = 128,
  kISub = 130,
  kIMul = 132,
  kUDiv = 134,
  kSDiv = 135,
  kUMod = 137,
  kLogicalOr = 166,
  kLogicalAnd = 167,
  kLogicalNot = 168,
  kSelect = 169,
  kIEqual = 170,
  kINotEqual = 171,
  kUGreaterThan = 172,
  kUGreaterThanEqual = 174,
  kULessThan = 176,
  kULessThanEqual = 178,
  kShiftRightLogical = 194,
  kShiftLeftLogical = 196,
  kBitwiseOr = 197,
  kBitwiseAnd = 199,
};

// The two-operand OpSpecConstantOp operations, on 32-bit values (a division by 0 gives 0:
// the shader would be invalid anyway).
struct BinaryOp {
  uint32_t opcode;
  uint32_t (*apply)(uint32_t a, uint32_t b);
};
constexpr BinaryOp kBinaryOps[] = {
    {kIAdd, [](uint32_t a, uint32_t b) { return a + b; }},
    {kISub, [](uint32_t a, uint32_t b) { return a - b; }},
    {kIMul, [](uint32_t a, uint32_t b) { return a * b; }},
    {kUDiv, [](uint32_t a, uint32_t b) { return b ? a / b : 0u; }},
    {kSDiv, [](uint32_t a, uint32_t b) { return b ? uint32_t(int32_t(a) / int32_t(b)) : 0u; }},
    {kUMod, [](uint32_t a, uint32_t b) { return b ? a % b : 0u; }},
    {kLogicalOr, [](uint32_t a, uint32_t b) { return uint32_t(a || b); }},
    {kLogicalAnd, [](uint32_t a, uint32_t b) { return uint32_t(a && b); }},
    {kIEqual, [](uint32_t a, uint32_t b) { return uint32_t(a == b); }},
    {kINotEqual, [](uint32_t a, uint32_t b) { return uint32_t(a != b); }},
    {kUGreaterThan, [](uint32_t a, uint32_t b) { return uint32_t(a > b); }},
    {kUGreaterThanEqual, [](uint32_t a, uint32_t b) { return uint32_t(a >= b); }},
    {kULessThan, [](uint32_t a, uint32_t b) { return uint32_t(a < b); }},
    {kULessThanEqual, [](uint32_t a, uint32_t b) { return uint32_t(a <= b); }},
    {kShiftRightLogical, [](uint32_t a, uint32_t b) { return a >> (b & 31); }},
    {kShiftLeftLogical, [](uint32_t a, uint32_t b) { return a << (b & 31); }},
    {kBitwiseOr, [](uint32_t a, uint32_t b) { return a | b; }},
    {kBitwiseAnd, [](uint32_t a, uint32_t b) { return a & b; }},
};

struct Reader {
  std::string kernel;
  std::map<uint32_t, uint64_t> scalar_bytes;                  // scalar type -> bytes
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> vectors;  // vector/matrix -> (of, count)
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> arrays;   // array -> (element, length id)
  std::map<uint32_t, std::vector<uint32_t>> structs, composites;
  std::map<uint32_t, uint32_t> pointee_of_workgroup_pointer;
  std::map<uint32_t, uint32_t> values;                 // constants, specializations applied
  std::map<uint32_t, std::vector<uint32_t>> spec_ops;  // result -> (opcode, operands...)
  std::vector<uint32_t> workgroup_variables;           // their pointer types
  std::map<uint32_t, uint32_t> spec_id;                // result id -> constant_id
  std::map<uint32_t, uint32_t> spec_defaults;          // result id -> declared bits
  std::vector<uint32_t> capabilities;                  // OpCapability operands

  // Records one declaration of the module (instruction op with words w[0..count)).
  void declare(uint32_t op, const uint32_t* w, uint32_t count) {
    switch (op) {
      case kOpCapability:
        capabilities.push_back(w[1]);
        break;
      case kOpDecorate:
        if (w[2] == kDecSpecId) spec_id[w[1]] = w[3];
        break;
      case kOpTypeBool:
        scalar_bytes[w[1]] = 4;
        break;
      case kOpTypeInt:
      case kOpTypeFloat:
        scalar_bytes[w[1]] = w[2] / 8;
        break;
      case kOpTypeVector:
      case kOpTypeMatrix:
        vectors[w[1]] = {w[2], w[3]};
        break;
      case kOpTypeArray:
        arrays[w[1]] = {w[2], w[3]};
        break;
      case kOpTypeStruct:
        structs[w[1]] = std::vector<uint32_t>(w + 2, w + count);
        break;
      case kOpTypePointer:
        if (w[2] == kStorageWorkgroup) pointee_of_workgroup_pointer[w[1]] = w[3];
        break;
      case kOpConstantTrue:
        values[w[2]] = 1;
        break;
      case kOpConstantFalse:
        values[w[2]] = 0;
        break;
      case kOpConstant:
        values[w[2]] = w[3];
        break;
      case kOpSpecConstantTrue:
        spec_defaults[w[2]] = 1;
        break;
      case kOpSpecConstantFalse:
        spec_defaults[w[2]] = 0;
        break;
      case kOpSpecConstant:
        spec_defaults[w[2]] = w[3];
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        composites[w[2]] = std::vector<uint32_t>(w + 3, w + count);
        break;
      case kOpSpecConstantOp:
        spec_ops[w[2]] = std::vector<uint32_t>(w + 3, w + count);
        break;
      case kOpVariable:
        if (w[3] == kStorageWorkgroup) workgroup_variables.push_back(w[1]);
        break;
      default:
        break;
    }
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error("kernel '" + kernel + "': " + why);
  }

  uint32_t value(uint32_t id, int depth = 0) {
    if (auto it = values.find(id); it != values.end()) return it->second;
    auto op = spec_ops.find(id);
    if (op == spec_ops.end() || depth > 64)
      fail("an array length (id " + std::to_string(id) + ") is not a constant");
    const std::vector<uint32_t>& w = op->second;
    const auto arg = [&](size_t i) { return value(w.at(i), depth + 1); };
    uint32_t r = 0;
    if (w[0] == kCompositeExtract) {
      r = component(w.at(1), w.at(2));
    } else if (w[0] == kSelect) {
      r = arg(1) ? arg(2) : arg(3);
    } else if (w[0] == kSNegate || w[0] == kLogicalNot) {
      r = w[0] == kSNegate ? uint32_t(-int32_t(arg(1))) : uint32_t(!arg(1));
    } else {
      const auto* f = std::find_if(std::begin(kBinaryOps), std::end(kBinaryOps),
                                   [&](const BinaryOp& b) { return b.opcode == w[0]; });
      if (f == std::end(kBinaryOps))
        fail("OpSpecConstantOp " + std::to_string(w[0]) + " in an array length");
      r = f->apply(arg(1), arg(2));
    }
    return values[id] = r;
  }

  uint32_t component(uint32_t composite, uint32_t index) {
    auto it = composites.find(composite);
    if (it == composites.end() || index >= it->second.size())
      fail("an array length extracts from a non-constant composite");
    return value(it->second[index]);
  }

  uint64_t bytes(uint32_t type, int depth = 0) {
    if (depth > 64) fail("a Workgroup type nests too deep");
    if (auto it = scalar_bytes.find(type); it != scalar_bytes.end()) return it->second;
    if (auto it = vectors.find(type); it != vectors.end())
      return it->second.second * bytes(it->second.first, depth + 1);
    if (auto it = arrays.find(type); it != arrays.end())
      return uint64_t(value(it->second.second)) * bytes(it->second.first, depth + 1);
    if (auto it = structs.find(type); it != structs.end()) {
      uint64_t sum = 0;
      for (uint32_t member : it->second) sum += bytes(member, depth + 1);
      return sum;
    }
    fail("a Workgroup variable has a type the reader cannot size (id " + std::to_string(type) +
         ")");
  }
};

}  // namespace

KernelNeeds readKernelNeeds(const std::string& kernel, std::span<const uint32_t> words,
                            std::span<const SpecConstantInfo> declared,
                            std::span<const uint32_t> bits) {
  Reader r{kernel};
  for (size_t at = kHeaderWords; at < words.size();) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xffff;
    if (count == 0 || at + count > words.size()) r.fail("truncated SPIR-V");
    const uint32_t* w = &words[at];
    r.declare(op, w, count);
    at += count;
  }
  for (const auto& [id, bits_default] : r.spec_defaults) {
    uint32_t v = bits_default;
    if (auto sid = r.spec_id.find(id); sid != r.spec_id.end())
      for (size_t i = 0; i < declared.size() && i < bits.size(); ++i)
        if (declared[i].id == sid->second) v = bits[i];
    r.values[id] = v;
  }
  KernelNeeds needs;
  needs.capabilities = r.capabilities;
  for (uint32_t pointer : r.workgroup_variables) {
    auto it = r.pointee_of_workgroup_pointer.find(pointer);
    if (it == r.pointee_of_workgroup_pointer.end()) r.fail("a Workgroup variable without a type");
    needs.shared_bytes += r.bytes(it->second);
  }
  return needs;
}

namespace {

// SPIR-V capabilities (section 3.31) that need a device feature, with the feature's name.
struct CapabilityNeed {
  uint32_t capability;
  const char* feature;
  bool DeviceInfo::*has;
};
constexpr CapabilityNeed kCapabilityNeeds[] = {
    {9, "shaderFloat16", &DeviceInfo::fp16},
    {10, "shaderFloat64", &DeviceInfo::fp64},
    {11, "shaderInt64", &DeviceInfo::int64},
    {39, "shaderInt8", &DeviceInfo::int8},
    {4433, "storageBuffer16BitAccess", &DeviceInfo::storage_16bit},
    {4448, "storageBuffer8BitAccess", &DeviceInfo::storage_8bit},
    {61, "subgroup operations in compute (VK_SUBGROUP_FEATURE_BASIC_BIT)",
     &DeviceInfo::subgroup_compute},
    {63, "subgroupArithmetic (VK_SUBGROUP_FEATURE_ARITHMETIC_BIT)",
     &DeviceInfo::subgroup_arithmetic},
    {65, "subgroupShuffle (VK_SUBGROUP_FEATURE_SHUFFLE_BIT)", &DeviceInfo::subgroup_shuffle},
    {5357, "VK_NV_cooperative_matrix", &DeviceInfo::coopmat},
};

}  // namespace

void requireKernelFits(const std::string& kernel, const KernelNeeds& needs,
                       std::span<const BindingInfo> bindings, const DeviceInfo& device) {
  const auto refuse = [&](const std::string& need, uint64_t allowed, const char* limit) {
    throw Error("kernel '" + kernel + "' needs " + need + "; " + device.label() + " allows " +
                std::to_string(allowed) + " (" + limit + ")");
  };
  static const char* kSizeLimit[3] = {"maxComputeWorkGroupSize[0]", "maxComputeWorkGroupSize[1]",
                                      "maxComputeWorkGroupSize[2]"};
  for (int axis = 0; axis < 3; ++axis)
    if (needs.local_size[axis] > device.max_workgroup_size[axis])
      refuse("a workgroup size of " + std::to_string(needs.local_size[axis]) + " on axis " +
                 "xyz"[axis],
             device.max_workgroup_size[axis], kSizeLimit[axis]);
  const uint64_t invocations =
      uint64_t(needs.local_size[0]) * needs.local_size[1] * needs.local_size[2];
  if (invocations > device.max_workgroup_invocations)
    refuse(std::to_string(invocations) + " invocations per workgroup",
           device.max_workgroup_invocations, "maxComputeWorkGroupInvocations");
  if (needs.shared_bytes > device.max_shared_memory)
    refuse(std::to_string(needs.shared_bytes) + " bytes of shared memory", device.max_shared_memory,
           "maxComputeSharedMemorySize");
  uint32_t storage = 0, uniform = 0, sampled = 0, images = 0;
  for (const BindingInfo& b : bindings) {
    storage += b.kind == BindingKind::StorageBuffer;
    uniform += b.kind == BindingKind::UniformBuffer;
    sampled += b.kind == BindingKind::UniformTexelBuffer;
    images += b.kind == BindingKind::StorageTexelBuffer;
  }
  if (storage > device.max_storage_buffers)
    refuse(std::to_string(storage) + " storage buffers", device.max_storage_buffers,
           "maxPerStageDescriptorStorageBuffers");
  if (uniform > device.max_uniform_buffers)
    refuse(std::to_string(uniform) + " uniform buffers", device.max_uniform_buffers,
           "maxPerStageDescriptorUniformBuffers");
  if (sampled > device.max_sampled_images)
    refuse(std::to_string(sampled) + " uniform texel buffers", device.max_sampled_images,
           "maxPerStageDescriptorSampledImages");
  if (images > device.max_storage_images)
    refuse(std::to_string(images) + " storage texel buffers", device.max_storage_images,
           "maxPerStageDescriptorStorageImages");
  if (bindings.size() > device.max_resources)
    refuse(std::to_string(bindings.size()) + " descriptors", device.max_resources,
           "maxPerStageResources");
  for (uint32_t capability : needs.capabilities)
    for (const CapabilityNeed& need : kCapabilityNeeds)
      if (capability == need.capability && !(device.*need.has))
        throw Error("kernel '" + kernel + "' needs " + need.feature + ", which " + device.label() +
                    " does not offer");
}

}  // namespace vkgrad::vk
