#include "vkgrad/vk/spec_constants.h"

#include "vkgrad/core/error.h"

namespace vkgrad::vk {
namespace {

std::string listOf(std::span<const SpecConstantInfo> declared) {
  if (declared.empty()) return "none";
  std::string list;
  for (const SpecConstantInfo& c : declared)
    list += (list.empty() ? "" : ", ") + std::string(specTypeName(c.type)) + " " + c.name;
  return list;
}

}  // namespace

std::vector<uint32_t> resolveSpecConstants(const std::string& kernel,
                                           std::span<const SpecConstantInfo> declared,
                                           std::span<const SpecConstant> given) {
  auto fail = [&](const std::string& why) {
    throw Error("kernel '" + kernel + "': " + why +
                " (its specialization constants: " + listOf(declared) + ")");
  };
  std::vector<uint32_t> bits(declared.size());
  std::vector<bool> seen(declared.size());
  for (const SpecConstant& c : given) {
    const std::string name(c.name);
    size_t i = 0;
    while (i < declared.size() && declared[i].name != c.name) ++i;
    if (i == declared.size()) fail("no specialization constant '" + name + "'");
    if (seen[i]) fail("specialization constant '" + name + "' given twice");
    if (c.value.type() != declared[i].type)
      fail("specialization constant '" + name + "' is declared " + specTypeName(declared[i].type) +
           ", given " + specTypeName(c.value.type()));
    seen[i] = true;
    bits[i] = c.value.bits();
  }
  for (size_t i = 0; i < declared.size(); ++i)
    if (!seen[i])
      fail("specialization constant '" + declared[i].name + "' (constant_id " +
           std::to_string(declared[i].id) + ") not given");
  return bits;
}

}  // namespace vkgrad::vk
