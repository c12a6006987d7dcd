// A Kernel is a compute pipeline built from an embedded shader and a set of
// specialization constants; its descriptor layout comes from SPIR-V reflection, and
// every kernel shares one push-constant range of 128 bytes (the guaranteed minimum).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/vk/vulkan.h"

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

  // The pipeline of the named shader with spec[i] as constant_id i; built on first use.
  // Throws Error listing the known kernels when the name does not exist.
  const Kernel& get(std::string_view name, std::span<const uint32_t> spec = {});
  const Kernel& get(std::string_view name, std::initializer_list<uint32_t> spec) {
    return get(name, std::span<const uint32_t>(spec.begin(), spec.size()));
  }
  size_t size() const { return kernels_.size(); }

 private:
  Context& context_;
  VkPipelineCache cache_ = VK_NULL_HANDLE;
  std::map<std::pair<std::string, std::vector<uint32_t>>, std::unique_ptr<Kernel>> kernels_;
};

}  // namespace vkgrad::vk
