#include "vkgrad/vk/kernel.h"

#include <volk.h>

#include <algorithm>

#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/kernel_fit.h"
#include "vkgrad/vk/shader_registry.h"

namespace vkgrad::vk {

const EmbeddedShader* findShader(std::string_view name) {
  for (const EmbeddedShader& shader : embeddedShaders())
    if (name == shader.name) return &shader;
  return nullptr;
}

namespace {

VkDescriptorType descriptorType(BindingKind kind) {
  switch (kind) {
    case BindingKind::StorageBuffer: return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    case BindingKind::UniformBuffer: return VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    case BindingKind::UniformTexelBuffer: return VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER;
    case BindingKind::StorageTexelBuffer: return VK_DESCRIPTOR_TYPE_STORAGE_TEXEL_BUFFER;
  }
  return VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
}

}  // namespace

struct KernelCache::Shader {
  const EmbeddedShader* embedded;
  ShaderLayout layout;
};

KernelCache::KernelCache(Context& context) : context_(context) {
  VkPipelineCacheCreateInfo info{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VK_CHECK(context.vk().vkCreatePipelineCache(context.device(), &info, nullptr, &cache_));
}

KernelCache::~KernelCache() {
  const VolkDeviceTable& vk = context_.vk();
  VkDevice device = context_.device();
  for (auto& [key, k] : kernels_) {
    vk.vkDestroyPipeline(device, k->pipeline_, nullptr);
    vk.vkDestroyPipelineLayout(device, k->pipeline_layout_, nullptr);
    vk.vkDestroyDescriptorSetLayout(device, k->set_layout_, nullptr);
  }
  vk.vkDestroyPipelineCache(device, cache_, nullptr);
}

const KernelCache::Shader& KernelCache::shader(std::string_view name) {
  if (auto it = shaders_.find(name); it != shaders_.end()) return *it->second;
  const EmbeddedShader* embedded = findShader(name);
  if (!embedded) {
    std::string known;
    for (const EmbeddedShader& s : embeddedShaders())
      known += std::string(known.empty() ? "" : ", ") + s.name;
    throw Error("no kernel named '" + std::string(name) + "'; kernels in this build: " + known);
  }
  auto shader = std::make_unique<Shader>(
      Shader{embedded, reflectShader(std::string(name), {embedded->words, embedded->word_count})});
  return *shaders_.emplace(std::string(name), std::move(shader)).first->second;
}

const Kernel& KernelCache::get(std::string_view name, std::span<const SpecConstant> spec) {
  const Shader& source = shader(name);
  const std::vector<SpecConstantInfo>& declared = source.layout.spec_constants;
  auto key =
      std::make_pair(std::string(name), resolveSpecConstants(std::string(name), declared, spec));
  if (auto it = kernels_.find(key); it != kernels_.end()) return *it->second;
  const std::vector<uint32_t>& bits = key.second;

  auto kernel = std::make_unique<Kernel>();
  kernel->name_ = key.first;
  kernel->layout_ = source.layout;
  for (int axis = 0; axis < 3; ++axis)
    for (size_t i = 0; i < declared.size(); ++i)
      if (declared[i].id == source.layout.local_size_id[axis])
        kernel->layout_.local_size[axis] = bits[i];

  const VolkDeviceTable& vk = context_.vk();
  VkDevice device = context_.device();
  KernelNeeds needs = readKernelNeeds(
      kernel->name_, {source.embedded->words, source.embedded->word_count}, declared, bits);
  std::copy(kernel->layout_.local_size, kernel->layout_.local_size + 3, needs.local_size);
  requireKernelFits(kernel->name_, needs, kernel->layout_.bindings, context_.info());

  std::vector<VkDescriptorSetLayoutBinding> bindings;
  for (const BindingInfo& b : kernel->layout_.bindings)
    bindings.push_back(
        {b.binding, descriptorType(b.kind), 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  VkDescriptorSetLayoutCreateInfo set_info{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_info.bindingCount = static_cast<uint32_t>(bindings.size());
  set_info.pBindings = bindings.data();
  VK_CHECK(vk.vkCreateDescriptorSetLayout(device, &set_info, nullptr, &kernel->set_layout_));

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, kMaxPushConstantBytes};
  VkPipelineLayoutCreateInfo layout_info{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  layout_info.setLayoutCount = 1;
  layout_info.pSetLayouts = &kernel->set_layout_;
  layout_info.pushConstantRangeCount = 1;
  layout_info.pPushConstantRanges = &push;
  // Owned by the cache from here, so a throw below cannot leak them.
  Kernel& k = *kernels_.emplace(key, std::move(kernel)).first->second;
  try {
    VK_CHECK(vk.vkCreatePipelineLayout(device, &layout_info, nullptr, &k.pipeline_layout_));

    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = source.embedded->word_count * sizeof(uint32_t);
    module_info.pCode = source.embedded->words;
    VkShaderModule module;
    VK_CHECK(vk.vkCreateShaderModule(device, &module_info, nullptr, &module));

    // Every constant is 32 bits (a bool a VkBool32), at 4 * its index in `declared`.
    std::vector<VkSpecializationMapEntry> entries;
    for (uint32_t i = 0; i < declared.size(); ++i)
      entries.push_back(
          {declared[i].id, static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)});
    VkSpecializationInfo spec_info{static_cast<uint32_t>(entries.size()), entries.data(),
                                   bits.size() * sizeof(uint32_t), bits.data()};
    VkComputePipelineCreateInfo pipeline_info{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    pipeline_info.stage = {VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    pipeline_info.stage.module = module;
    pipeline_info.stage.pName = "main";
    pipeline_info.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec_info;
    pipeline_info.layout = k.pipeline_layout_;
    VkResult result =
        vk.vkCreateComputePipelines(device, cache_, 1, &pipeline_info, nullptr, &k.pipeline_);
    vk.vkDestroyShaderModule(device, module, nullptr);
    if (result != VK_SUCCESS)
      throwVulkanError("vkCreateComputePipelines", result, "kernel " + k.name_);
  } catch (...) {
    vk.vkDestroyPipelineLayout(device, k.pipeline_layout_, nullptr);
    vk.vkDestroyDescriptorSetLayout(device, k.set_layout_, nullptr);
    kernels_.erase(key);
    throw;
  }
  return k;
}

}  // namespace vkgrad::vk
