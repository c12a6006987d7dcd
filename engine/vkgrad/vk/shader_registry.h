// The SPIR-V of every shaders/**/*.comp, compiled and embedded at build time
// (cmake/Shaders.cmake writes the table). Names are paths below shaders/ without
// ".comp", e.g. "matmul/naive".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace vkgrad::vk {

struct EmbeddedShader {
  const char* name;
  const uint32_t* words;
  size_t word_count;
};

std::span<const EmbeddedShader> embeddedShaders();

// nullptr when no shader has that name.
const EmbeddedShader* findShader(std::string_view name);

}  // namespace vkgrad::vk
