// Specialization constants by name: resolving a caller's names and typed values against a
// shader's reflected constants, without a device (tests/vk/test_kernel.cpp builds pipelines).
#include "vkgrad/vk/spec_constants.h"

#include <bit>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vkgrad/core/error.h"

namespace vkgrad::test {
namespace {

using vk::SpecType;

// As reflected from `layout(local_size_x_id = 0) in; layout(constant_id = 1) const int OFFSET
// = -1; layout(constant_id = 2) const bool ACCUMULATE = false; layout(constant_id = 5) const
// float SCALE = 1.0;`
const std::vector<vk::SpecConstantInfo> kDeclared = {
    {"local_size_x", 0, SpecType::Uint, 1},
    {"OFFSET", 1, SpecType::Int, uint32_t(-1)},
    {"ACCUMULATE", 2, SpecType::Bool, 0},
    {"SCALE", 5, SpecType::Float, std::bit_cast<uint32_t>(1.0f)},
};

std::string resolveError(std::initializer_list<vk::SpecConstant> given) {
  try {
    vk::resolveSpecConstants("test/kernel", kDeclared, {given.begin(), given.size()});
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SpecConstants, ValuesCarryTheirGlslType) {
  EXPECT_EQ(vk::SpecValue(true).type(), SpecType::Bool);
  EXPECT_EQ(vk::SpecValue(true).bits(), 1u);  // VK_TRUE
  EXPECT_EQ(vk::SpecValue(false).bits(), 0u);
  EXPECT_EQ(vk::SpecValue(7u).type(), SpecType::Uint);
  EXPECT_EQ(vk::SpecValue(-2).type(), SpecType::Int);
  EXPECT_EQ(vk::SpecValue(-2).bits(), uint32_t(-2));
  EXPECT_EQ(vk::SpecValue(0.5f).type(), SpecType::Float);
  EXPECT_EQ(vk::SpecValue(0.5f).bits(), std::bit_cast<uint32_t>(0.5f));
}

// Bits in the shader's constant_id order, whatever order the caller names them in.
TEST(SpecConstants, ResolvesNamesToBitsInConstantIdOrder) {
  const std::vector<uint32_t> expected = {64u, uint32_t(-3), 1u, std::bit_cast<uint32_t>(0.25f)};
  const vk::SpecConstants in_order = {
      {"local_size_x", 64u}, {"OFFSET", -3}, {"ACCUMULATE", true}, {"SCALE", 0.25f}};
  const vk::SpecConstants shuffled = {
      {"SCALE", 0.25f}, {"ACCUMULATE", true}, {"local_size_x", 64u}, {"OFFSET", -3}};
  EXPECT_EQ(vk::resolveSpecConstants("test/kernel", kDeclared, in_order), expected);
  EXPECT_EQ(vk::resolveSpecConstants("test/kernel", kDeclared, shuffled), expected);
  EXPECT_TRUE(vk::resolveSpecConstants("test/none", {}, {}).empty());
}

TEST(SpecConstants, ANameTheShaderLacksThrows) {
  const std::string e = resolveError({{"local_size_x", 64u},
                                      {"OFFSET", -3},
                                      {"ACCUMULATE", true},
                                      {"SCALE", 0.25f},
                                      {"TILE", 8u}});
  EXPECT_NE(e.find("kernel 'test/kernel': no specialization constant 'TILE'"), std::string::npos)
      << e;
  // The message lists what the shader has.
  EXPECT_NE(e.find("uint local_size_x, int OFFSET, bool ACCUMULATE, float SCALE"),
            std::string::npos)
      << e;
}

TEST(SpecConstants, AValueOfAnotherTypeThrows) {
  // uint32_t(accumulate) where the shader declares a bool: the positional API took it.
  std::string e =
      resolveError({{"local_size_x", 64u}, {"OFFSET", -3}, {"ACCUMULATE", 1u}, {"SCALE", 0.25f}});
  EXPECT_NE(e.find("specialization constant 'ACCUMULATE' is declared bool, given uint"),
            std::string::npos)
      << e;
  // A plain int literal for a uint.
  e = resolveError({{"local_size_x", 64}, {"OFFSET", -3}, {"ACCUMULATE", true}, {"SCALE", 0.25f}});
  EXPECT_NE(e.find("'local_size_x' is declared uint, given int"), std::string::npos) << e;
}

TEST(SpecConstants, ANameGivenTwiceThrows) {
  const std::string e = resolveError({{"local_size_x", 64u},
                                      {"OFFSET", -3},
                                      {"ACCUMULATE", true},
                                      {"SCALE", 0.25f},
                                      {"ACCUMULATE", false}});
  EXPECT_NE(e.find("specialization constant 'ACCUMULATE' given twice"), std::string::npos) << e;
}

// No default is taken silently: a forgotten ACCUMULATE would overwrite instead of adding.
TEST(SpecConstants, AConstantNotGivenThrows) {
  const std::string e = resolveError({{"local_size_x", 64u}, {"OFFSET", -3}, {"SCALE", 0.25f}});
  EXPECT_NE(e.find("specialization constant 'ACCUMULATE' (constant_id 2) not given"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace vkgrad::test
