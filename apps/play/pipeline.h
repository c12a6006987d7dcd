// The app's graphics pipelines: no vertex inputs (the vertex shaders make their positions
// from gl_VertexIndex and storage buffers), one colour attachment, a dynamic viewport so they
// survive a resized swapchain.
#pragma once

#include <cstddef>
#include <cstdint>

#include "play/device.h"

namespace vkgrad::play {

// A module from embedded SPIR-V (`bytes` of it); the caller destroys it.
VkShaderModule shaderModule(VkDevice device, const uint32_t* words, size_t bytes);

// blend: source-alpha blending over what is drawn (the points' anti-aliased rims).
VkPipeline createPipeline(VkDevice device, VkPipelineLayout layout, VkRenderPass pass,
                          VkShaderModule vert, VkShaderModule frag, bool blend);

}  // namespace vkgrad::play
