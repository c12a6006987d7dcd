#include "vkgrad/vk/spirv_reflect.h"

#include <algorithm>
#include <map>
#include <set>

#include "vkgrad/vk/error.h"
#include "vkgrad/vk/spirv_words.h"

namespace vkgrad::vk {
namespace {

using namespace spirv;  // the SPIR-V numbers by name (vk/spirv_words.h)

// A literal string operand: UTF-8 bytes packed little-endian into words, NUL-terminated.
std::string literalString(const uint32_t* w, const uint32_t* end) {
  std::string s;
  for (; w < end; ++w)
    for (int byte = 0; byte < 4; ++byte) {
      const char c = char((*w >> (8 * byte)) & 0xff);
      if (c == '\0') return s;
      s += c;
    }
  return s;
}

}  // namespace

const char* specTypeName(SpecType type) {
  switch (type) {
    case SpecType::Bool: return "bool";
    case SpecType::Int: return "int";
    case SpecType::Uint: return "uint";
    case SpecType::Float: return "float";
  }
  return "?";
}

namespace {

struct Pointer { uint32_t storage, type; };
struct Image { uint32_t dim, sampled; };
struct Scalar { SpecType type; uint32_t width; };
struct Spec { uint32_t type_id, default_bits; };

// What reflectShader reads from a module's declarations, by result id.
struct Module {
  std::map<uint32_t, uint32_t> binding, set, spec_id;
  std::set<uint32_t> non_writable, block, buffer_block, workgroup_size_ids;
  std::map<uint32_t, std::set<uint32_t>> member_non_writable;  // struct -> members
  std::map<uint32_t, uint32_t> member_count;
  std::map<uint32_t, Pointer> pointers;
  std::map<uint32_t, Image> images;
  std::map<uint32_t, uint32_t> sampled_images;  // sampled image -> image
  std::map<uint32_t, uint32_t> constants;       // id -> value
  std::map<uint32_t, std::string> names;
  std::map<uint32_t, Scalar> scalars;  // bool, int and float types
  std::map<uint32_t, Spec> specs;  // scalar specialization constants by result id
  std::map<uint32_t, std::vector<uint32_t>> composites;
  std::set<uint32_t> arrays;
  std::vector<std::pair<uint32_t, uint32_t>> variables;  // (id, pointer type)
  uint32_t local_size[3] = {1, 1, 1};

};

[[noreturn]] void failKernel(const std::string& name, const std::string& why) {
  throw Error("kernel '" + name + "': " + why);
}

Module parseModule(const std::string& name, std::span<const uint32_t> words) {
  auto fail = [&](const std::string& why) -> void { failKernel(name, why); };
  if (words.size() < kHeaderWords || words[0] != kMagic) fail("not a SPIR-V module");
  Module m;
  auto& [binding, set, spec_id, non_writable, block, buffer_block, workgroup_size_ids, member_non_writable, member_count, pointers, images, sampled_images, constants, names, scalars, specs, composites, arrays, variables, local_size] = m;
  for (size_t at = kHeaderWords; at < words.size();) {
    const uint32_t count = words[at] >> 16, op = words[at] & 0xffff;
    if (count == 0 || at + count > words.size()) fail("truncated SPIR-V");
    const uint32_t* w = &words[at];
    switch (op) {
      case kOpName: names[w[1]] = literalString(w + 2, w + count); break;
      case kOpTypeBool: scalars[w[1]] = {SpecType::Bool, 32}; break;
      case kOpTypeInt: scalars[w[1]] = {w[3] ? SpecType::Int : SpecType::Uint, w[2]}; break;
      case kOpTypeFloat: scalars[w[1]] = {SpecType::Float, w[2]}; break;
      case kOpDecorate:
        if (w[2] == kDecBinding) binding[w[1]] = w[3];
        if (w[2] == kDecDescriptorSet) set[w[1]] = w[3];
        if (w[2] == kDecSpecId) spec_id[w[1]] = w[3];
        if (w[2] == kDecNonWritable) non_writable.insert(w[1]);
        if (w[2] == kDecBlock) block.insert(w[1]);
        if (w[2] == kDecBufferBlock) buffer_block.insert(w[1]);
        if (w[2] == kDecBuiltIn && w[3] == kBuiltInWorkgroupSize) workgroup_size_ids.insert(w[1]);
        break;
      case kOpMemberDecorate:
        if (w[3] == kDecNonWritable) member_non_writable[w[1]].insert(w[2]);
        break;
      case kOpExecutionMode:
        if (w[2] == kExecutionModeLocalSize) std::copy(w + 3, w + 6, local_size);
        break;
      case kOpTypeStruct: member_count[w[1]] = count - 2; break;
      case kOpTypeArray: arrays.insert(w[1]); break;
      case kOpTypeImage: images[w[1]] = {w[3], w[7]}; break;
      case kOpTypeSampledImage: sampled_images[w[1]] = w[2]; break;
      case kOpTypePointer: pointers[w[1]] = {w[2], w[3]}; break;  // id, storage, pointee
      case kOpConstant: constants[w[2]] = w[3]; break;
      case kOpSpecConstantTrue:
      case kOpSpecConstantFalse:
      case kOpSpecConstant:
        specs[w[2]] = {w[1], op == kOpSpecConstant ? w[3] : (op == kOpSpecConstantTrue ? 1u : 0u)};
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        composites[w[2]] = std::vector<uint32_t>(w + 3, w + count);
        break;
      case kOpVariable: variables.push_back({w[2], w[1]}); break;
      default: break;
    }
    at += count;
  }

  return m;
}

// The workgroup size (its defaults, and the constant_id of each specialized axis); returns
// each axis's specialization constant -> axis.
std::map<uint32_t, int> readWorkgroupSize(const std::string& name, Module& m,
                                          ShaderLayout& layout) {
  auto fail = [&](const std::string& why) -> void { failKernel(name, why); };
  auto& [binding, set, spec_id, non_writable, block, buffer_block, workgroup_size_ids, member_non_writable, member_count, pointers, images, sampled_images, constants, names, scalars, specs, composites, arrays, variables, local_size] = m;
  std::copy(local_size, local_size + 3, layout.local_size);
  std::map<uint32_t, int> axis_of;  // a workgroup dimension's specialization constant -> axis
  for (uint32_t id : workgroup_size_ids) {
    auto it = composites.find(id);
    if (it == composites.end() || it->second.size() != 3) fail("unreadable WorkgroupSize");
    for (int axis = 0; axis < 3; ++axis) {
      const uint32_t component = it->second[axis];
      if (auto s = specs.find(component); s != specs.end()) {
        layout.local_size[axis] = s->second.default_bits;
        if (auto sid = spec_id.find(component); sid != spec_id.end()) {
          layout.local_size_id[axis] = sid->second;
          axis_of[component] = axis;
        }
      } else if (auto c = constants.find(component); c != constants.end()) {
        layout.local_size[axis] = c->second;
      } else {
        fail("WorkgroupSize is not made of constants");
      }
    }
  }

  return axis_of;
}

void readSpecConstants(const std::string& name, Module& m, const std::map<uint32_t, int>& axis_of,
                       ShaderLayout& layout) {
  auto fail = [&](const std::string& why) -> void { failKernel(name, why); };
  auto& [binding, set, spec_id, non_writable, block, buffer_block, workgroup_size_ids, member_non_writable, member_count, pointers, images, sampled_images, constants, names, scalars, specs, composites, arrays, variables, local_size] = m;
  // One entry per constant_id. glslang declares a workgroup dimension's local_size_x_id as
  // an unnamed constant of its own, which shares the id of a named one where the shader
  // declares both (matmul/texel's SG): the named one names the id and gives its default.
  std::map<uint32_t, SpecConstantInfo> by_id;
  std::set<uint32_t> named_ids;  // ids named by an OpName rather than by their axis
  for (const auto& [id, spec] : specs) {
    auto sid = spec_id.find(id);
    if (sid == spec_id.end()) continue;  // not specializable
    const std::string where = "constant_id " + std::to_string(sid->second);
    auto scalar = scalars.find(spec.type_id);
    if (scalar == scalars.end() || scalar->second.width != 32)
      fail(where + " is not a 32-bit bool, int, uint or float");
    SpecConstantInfo info{names.count(id) ? names[id] : "", sid->second, scalar->second.type,
                          spec.default_bits};
    const bool named = !info.name.empty();
    if (!named) {
      auto axis = axis_of.find(id);
      if (axis == axis_of.end()) fail(where + " has no name (were debug names stripped?)");
      info.name = std::string("local_size_") + "xyz"[axis->second];
    }
    auto [it, inserted] = by_id.emplace(info.id, info);
    SpecConstantInfo& seen = it->second;
    if (!inserted && seen.type != info.type)
      fail(where + " is declared as both " + specTypeName(seen.type) + " and " +
           specTypeName(info.type));
    if (!inserted && named) {
      if (named_ids.count(info.id) && seen.name != info.name)
        fail(where + " is named both " + seen.name + " and " + info.name);
      seen = info;
    }
    if (named) named_ids.insert(info.id);
  }
  for (auto& [id, info] : by_id) layout.spec_constants.push_back(std::move(info));

}

void readBindings(const std::string& name, Module& m, ShaderLayout& layout) {
  auto fail = [&](const std::string& why) -> void { failKernel(name, why); };
  auto& [binding, set, spec_id, non_writable, block, buffer_block, workgroup_size_ids, member_non_writable, member_count, pointers, images, sampled_images, constants, names, scalars, specs, composites, arrays, variables, local_size] = m;
  for (auto [id, pointer_type] : variables) {
    if (!binding.count(id)) continue;
    if (set.count(id) && set[id] != 0) fail("only descriptor set 0 is supported");
    const Pointer pointer = pointers.at(pointer_type);
    if (arrays.count(pointer.type)) fail("arrays of descriptors are not supported");
    BindingInfo info;
    info.binding = binding[id];
    if (pointer.storage == kStorageBuffer ||
        (pointer.storage == kUniform && buffer_block.count(pointer.type))) {
      info.kind = BindingKind::StorageBuffer;
      const auto& members = member_non_writable[pointer.type];
      const bool all_members_readonly = members.size() == member_count[pointer.type];
      info.writes = !(non_writable.count(id) || all_members_readonly);
    } else if (pointer.storage == kUniform) {
      info.kind = BindingKind::UniformBuffer;
    } else if (pointer.storage == kUniformConstant) {
      uint32_t image = pointer.type;
      if (auto s = sampled_images.find(image); s != sampled_images.end()) image = s->second;
      auto it = images.find(image);
      if (it == images.end() || it->second.dim != kDimBuffer)
        fail("binding " + std::to_string(info.binding) + " is not a buffer or texel buffer");
      if (it->second.sampled == 1) {
        info.kind = BindingKind::UniformTexelBuffer;
      } else {
        info.kind = BindingKind::StorageTexelBuffer;
        info.writes = !non_writable.count(id);
      }
    } else {
      fail("binding " + std::to_string(info.binding) + " has an unsupported storage class");
    }
    layout.bindings.push_back(info);
  }
  std::sort(layout.bindings.begin(), layout.bindings.end(),
            [](const BindingInfo& a, const BindingInfo& b) { return a.binding < b.binding; });
  // Variables may alias one binding (a storage buffer seen as uint[] and as uvec4[]): one
  // descriptor, written if any of them writes. Aliases must agree on the descriptor kind.
  std::vector<BindingInfo> merged;
  for (const BindingInfo& b : layout.bindings) {
    if (!merged.empty() && merged.back().binding == b.binding) {
      if (merged.back().kind != b.kind)
        fail("binding " + std::to_string(b.binding) + " is declared with two descriptor kinds");
      merged.back().writes = merged.back().writes || b.writes;
    } else {
      merged.push_back(b);
    }
  }
  layout.bindings = std::move(merged);
  for (size_t i = 0; i < layout.bindings.size(); ++i)
    if (layout.bindings[i].binding != i) fail("bindings must be numbered 0, 1, 2, ... without gaps");
}

}  // namespace

ShaderLayout reflectShader(const std::string& name, std::span<const uint32_t> words) {
  Module m = parseModule(name, words);
  ShaderLayout layout;
  const std::map<uint32_t, int> axis_of = readWorkgroupSize(name, m, layout);
  readSpecConstants(name, m, axis_of, layout);
  readBindings(name, m, layout);
  return layout;
}

}  // namespace vkgrad::vk
