// ops::convert between f32, f16 and bf16: the device's roundings bit for bit against the
// host's (ops/reference/half.h), which every 16-bit kernel's reference relies on.
#include "vkgrad/ops/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;

using ConvertTest = VkTest;

// Floats at and around every rounding boundary: halfway points of both formats (ties in both
// directions), the largest finite values and the overflow threshold, subnormals of f16,
// infinities, NaN, zeros of both signs; then random ones across f16's range and beyond.
std::vector<float> edgeCases(Rng& rng) {
  std::vector<float> x = {0.0f,
                          -0.0f,
                          1.0f,
                          -2.5f,
                          65504.0f,
                          65519.0f,
                          65520.0f,
                          65536.0f,
                          1e6f,
                          -1e30f,
                          std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(),
                          std::nanf(""),
                          std::ldexp(1.0f, -24),
                          std::ldexp(1.0f, -25),
                          std::ldexp(3.0f, -26),
                          std::ldexp(1.0f, -14),
                          std::ldexp(1.0f, -15),
                          std::ldexp(1.0f, -26),
                          std::ldexp(1.0f, -130)};
  for (int e = -20; e <= 15; ++e)
    for (float m : {1.0f, 1.5f}) {
      const float b = std::ldexp(m, e);
      for (float f :
           {1.0f + std::ldexp(1.0f, -11), 1.0f + std::ldexp(3.0f, -11), 1.0f + std::ldexp(1.0f, -8),
            1.0f + std::ldexp(3.0f, -8), 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)}) {
        x.push_back(b * f);
        x.push_back(-b * f);
      }
    }
  for (float v : rng.uniform(3001, -70000.0f, 70000.0f)) x.push_back(v);
  for (float v : rng.uniform(1000, -1e-4f, 1e-4f)) x.push_back(v);
  return x;
}

// The 16-bit values of a tensor of n elements at element `at` of its buffer.
std::vector<uint16_t> bitsOf(vk::Context& ctx, const vk::Buffer& buffer, size_t at, size_t n) {
  const auto words = downloadWords(ctx, buffer, (at + n + 1) / 2);
  std::vector<uint16_t> out(n);
  std::memcpy(out.data(), reinterpret_cast<const uint8_t*>(words.data()) + 2 * at, 2 * n);
  return out;
}

TEST_F(ConvertTest, NarrowsBitForBitAsTheHost) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const auto x = edgeCases(rng);
  const Shape shape{int64_t(x.size())};
  auto src = upload(ctx(), shape, x);
  for (DType to : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(to));
    vk::Buffer dst = ctx().allocator().allocate(x.size() * 2 + 4);
    vk::Recorder rec(ctx());
    ops::convert(rec, src.view(), ops::view(dst, shape, 0, to));
    rec.submit();
    const auto got = bitsOf(ctx(), dst, 0, x.size());
    size_t wrong = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t want = to == DType::F16 ? ops::ref::toHalf(x[i]) : ops::ref::toBf16(x[i]);
      const float g = to == DType::F16 ? ops::ref::fromHalf(got[i]) : ops::ref::fromBf16(got[i]);
      if (std::isnan(x[i]) ? !std::isnan(g) : got[i] != want)
        ADD_FAILURE() << "x = " << x[i] << ": got 0x" << std::hex << got[i] << ", want 0x" << want
                      << std::dec << (++wrong > 20 ? " (stopping)" : "");
      if (wrong > 20) break;
    }
  }
}

// Every one of the 65,536 values of each format widens exactly, and converts to the other
// format as the host's double rounding does (f16 -> f32 -> bf16), at odd element offsets.
TEST_F(ConvertTest, WidensEveryValueExactlyAndConvertsBetweenFormats) {
  std::vector<float> all16;
  for (DType from : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(from));
    const size_t n = 65536, at = 3;  // the view starts 6 bytes into its buffer
    std::vector<uint16_t> bits(at + n + 1, 0x5555);
    for (size_t h = 0; h < n; ++h) bits[at + h] = uint16_t(h);
    vk::Buffer src = ctx().allocator().allocate(bits.size() * 2);
    ctx().staging().upload(src, 0, bits.data(), bits.size() * 2);
    const DType other = from == DType::F16 ? DType::BF16 : DType::F16;
    auto wide = poisoned(ctx(), {int64_t(n)});
    vk::Buffer narrow = ctx().allocator().allocate((n + at + 1) * 2);
    vk::Recorder rec(ctx());
    const ops::TensorView sv = ops::view(src, {int64_t(n)}, 2 * at, from);
    ops::convert(rec, sv, wide.view());
    ops::convert(rec, sv, ops::view(narrow, {int64_t(n)}, 2 * at, other));
    rec.submit();
    const auto w = download(ctx(), wide);
    const auto o = bitsOf(ctx(), narrow, at, n);
    for (size_t h = 0; h < n; ++h) {
      const float want =
          from == DType::F16 ? ops::ref::fromHalf(uint16_t(h)) : ops::ref::fromBf16(uint16_t(h));
      const uint16_t want_other =
          other == DType::F16 ? ops::ref::toHalf(want) : ops::ref::toBf16(want);
      if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(w[h])) << h;
        continue;
      }
      // lavapipe flushes f32 denormals (bf16's smallest values) to zero when it computes;
      // widening is a bit shift, so they survive here.
      ASSERT_EQ(std::memcmp(&w[h], &want, 4), 0) << "0x" << std::hex << h;
      ASSERT_EQ(o[h], want_other) << "0x" << std::hex << h;
    }
  }
}

TEST_F(ConvertTest, RejectsBadViewsBeforeRecording) {
  Rng rng;
  auto a = upload(ctx(), {4, 6}, rng.uniform(24)), b = poisoned(ctx(), {5, 5});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::convert(rec, a.view(), b.view()); },
      "convert: src (4,6) and dst (5,5) hold different numbers of elements");
  expectShapeError(
      rec, [&] { ops::convert(rec, a.view(), ops::view(b.buffer, {24}, 0, DType::U32)); },
      "convert: dst must be f32, f16 or bf16, got u32");
  expectShapeError(
      rec,
      [&] {
        ops::convert(rec, ops::view(a.buffer, {12}, 0), ops::view(a.buffer, {12}, 8, DType::F16));
      },
      "convert: dst (12) overlaps src (12)");
  expectShapeError(
      rec, [&] { ops::convert(rec, a.view(), ops::view(b.buffer, {24}, 1, DType::F16)); },
      "convert: dst offset 1 is not a multiple of 2 bytes");
}

}  // namespace
}  // namespace vkgrad::test
