// io/npy.h: NumPy's .npy files, read and written, and the errors bad ones get.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "common/random.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/npy.h"

namespace vkgrad::test {
namespace {

std::vector<uint8_t> withHeader(const std::string& dict, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out{0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  std::string h = dict;
  h.append((64 - (10 + h.size() + 1) % 64) % 64, ' ');
  h += '\n';
  out.push_back(uint8_t(h.size() & 0xff));
  out.push_back(uint8_t(h.size() >> 8));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string errorOf(const std::vector<uint8_t>& bytes) {
  try {
    graph::parseNpy(bytes, "t.npy");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(NpyTest, FloatsRoundTripWithTheirShape) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const std::vector<int64_t>& shape :
       {std::vector<int64_t>{3, 5, 7}, std::vector<int64_t>{13}, std::vector<int64_t>{}}) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const std::vector<float> v = rng.normal(size_t(n));
    const std::vector<uint8_t> bytes = graph::encodeNpy(shape, v);
    EXPECT_EQ((bytes.size() - v.size() * 4) % 64, 0u);  // data on a 64-byte boundary
    const graph::NpyArray a = graph::parseNpy(bytes, "t.npy");
    EXPECT_EQ(a.descr, "<f4");
    EXPECT_EQ(a.shape, shape);
    EXPECT_EQ(a.floats, v);
  }
}

TEST(NpyTest, IntegersAndOtherFloatKindsWiden) {
  std::vector<uint8_t> i8(3 * 8);
  const int64_t ids[3] = {7, -2, int64_t(1) << 40};
  std::memcpy(i8.data(), ids, sizeof ids);
  const auto a = graph::parseNpy(
      withHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", i8), "t");
  EXPECT_EQ(a.kind, graph::NpyArray::Kind::Int);
  EXPECT_EQ(a.ints, (std::vector<int64_t>{7, -2, int64_t(1) << 40}));
  std::vector<uint8_t> f8(2 * 8);
  const double d[2] = {0.1, -3.5};
  std::memcpy(f8.data(), d, sizeof d);
  const auto b = graph::parseNpy(
      withHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }", f8), "t");
  EXPECT_EQ(b.floats, (std::vector<float>{0.1f, -3.5f}));
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 2}));
}

TEST(NpyTest, BadFilesAreNamedWithWhy) {
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  const std::vector<uint8_t> data(16, 0);
  EXPECT_NE(errorOf({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}).find("magic"), std::string::npos);
  auto truncated = withHeader(ok, data);
  truncated.resize(truncated.size() - 3);
  EXPECT_NE(errorOf(truncated).find("data bytes"), std::string::npos);
  EXPECT_NE(errorOf(withHeader("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", data))
                .find("'>f4'"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", data))
                .find("Fortran"),
            std::string::npos);
  EXPECT_NE(
      errorOf(
          withHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", data))
          .find("2^31"),
      std::string::npos);
  EXPECT_NE(errorOf(withHeader("{'descr': '<U4', 'fortran_order': False, 'shape': (2, 2), }", data))
                .find("not supported"),
            std::string::npos);
  EXPECT_NE(errorOf(withHeader("{'fortran_order': False, 'shape': (2, 2), }", data)).find("descr"),
            std::string::npos);
  EXPECT_THROW(graph::readNpy("/nonexistent/x.npy"), Error);
}

}  // namespace
}  // namespace vkgrad::test
