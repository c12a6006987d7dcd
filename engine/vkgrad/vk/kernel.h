// A Kernel is a compute pipeline built from an embedded shader and its specialization
// constants, given by name (spec_constants.h); its descriptor layout comes from SPIR-V
// reflection, and every kernel shares one push-constant range of 128 bytes (the
// guaranteed minimum).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/vk/vulkan.h"

#include "vkgrad/vk/spec_constants.h"
#include "vkgrad/vk/spirv_reflect.h"

namespace vkgrad::vk {

class Context;

constexpr uint32_t kMaxPushConstantBytes = 128;

class Kernel {
 public:
  const std::string& name() const { return name_; }
  const std::vector<BindingInfo>& bindings() const { return layout_.bindings; }
  uint32_t localSize(int axis) const { return layout_.local_size[axis]; }
  VkPipeline pipeline() const { return pipeline_; }
  VkPipelineLayout pipelineLayout() const { return pipeline_layout_; }
  VkDescriptorSetLayout setLayout() const { return set_layout_; }

 private:
  friend class KernelCache;
  std::string name_;
  ShaderLayout layout_;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout pipeline_layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
};

class KernelCache {
 public:
  explicit KernelCache(Context& context);
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The pipeline of the named shader with every one of its specialization constants
  // given by name, in any order: get("matmul/naive", {{"local_size_x", 16u}, ...}). Built
  // on first use. Throws Error listing the known kernels when the shader does not exist,
  // and naming the kernel and the constant when `spec` does not match the shader's
  // (resolveSpecConstants): before any pipeline is made, on every call.
  const Kernel& get(std::string_view name, std::span<const SpecConstant> spec = {});
  const Kernel& get(std::string_view name, std::initializer_list<SpecConstant> spec) {
    return get(name, std::span<const SpecConstant>(spec.begin(), spec.size()));
  }
  size_t size() const { return kernels_.size(); }

 private:
  struct Shader;  // an embedded shader and its reflection before specialization
  const Shader& shader(std::string_view name);

  Context& context_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::map<std::string, std::unique_ptr<Shader>, std::less<>> shaders_;
  // Keyed by the bits of every constant in constant_id order, so the order the caller
  // names them in does not make another pipeline.
  std::map<std::pair<std::string, std::vector<uint32_t>>, std::unique_ptr<Kernel>> kernels_;
};

}  // namespace vkgrad::vk
