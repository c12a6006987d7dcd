#include "vkgrad/ops/copy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using ops::CopyVariant;
using ops::Shape;

class CopyTest : public VkTest {
 protected:
  // `n` random words at word `at` of a buffer whose other words hold a sentinel.
  static vk::Buffer words(const std::vector<uint32_t>& data, int64_t at, int64_t total) {
    std::vector<uint32_t> all(total, kSentinel);
    std::copy(data.begin(), data.end(), all.begin() + at);  // data may be empty
    vk::Buffer b = ctx().allocator().allocate(all.size() * 4);
    ctx().staging().upload(b, 0, all.data(), all.size() * 4);
    return b;
  }
  static std::vector<uint32_t> readWords(const vk::Buffer& b, int64_t total) {
    std::vector<uint32_t> out(total);
    ctx().staging().download(b, 0, out.data(), out.size() * 4);
    return out;
  }
  static constexpr uint32_t kSentinel = 0xdeadbeefu;
};

std::vector<uint32_t> floatWords(Rng& rng, size_t n) {
  const auto f = rng.normal(n, 0.0f, 100.0f);
  std::vector<uint32_t> w(n);
  std::memcpy(w.data(), f.data(), n * 4);
  return w;
}

// Each element lands where it belongs, bit for bit, and nothing outside dst changes; for
// every variant, odd sizes, and every offset of whole words (texel needs src and dst on 16
// bytes: it fetches and stores four words at a time).
TEST_F(CopyTest, CopiesEveryElementAtAnyOffset) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (CopyVariant variant : {CopyVariant::Auto, CopyVariant::Storage, CopyVariant::Texel})
    for (int64_t n : {1, 3, 17, 129, 33 * 257 + 1, 33 * 257 + 3})
      for (int64_t src_at : {0, 4, 1, 3, 8}) {
        const int64_t dst_at = (src_at + 4) % 9, total = n + 9;
        if (variant == CopyVariant::Texel && (src_at % 4 != 0 || dst_at % 4 != 0)) continue;
        SCOPED_TRACE(testing::Message() << ops::copyVariantName(variant) << ", n " << n
                                        << ", src at " << src_at << ", dst at " << dst_at);
        const auto data = floatWords(rng, size_t(n));
        vk::Buffer src = words(data, src_at, total), dst = words({}, 0, total);
        vk::Recorder rec(ctx());
        // A reshape on the way: (n) into (1, n).
        ops::copy(rec, ops::view(src, {n}, uint64_t(src_at) * 4),
                  ops::view(dst, {1, n}, uint64_t(dst_at) * 4), variant);
        rec.submit();
        const auto got = readWords(dst, total);
        for (int64_t i = 0; i < total; ++i) {
          const bool inside = i >= dst_at && i < dst_at + n;
          const uint32_t want = inside ? data[i - dst_at] : kSentinel;
          ASSERT_EQ(got[i], want) << "word " << i << (inside ? "" : " (outside dst)");
        }
      }
}

// u32 words (ids, targets) take the storage path, so every bit pattern survives, NaN
// payloads and denormals included.
TEST_F(CopyTest, CopiesU32WordsExactly) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 1001;
  std::vector<uint32_t> data(n);
  for (auto& w : data) w = (rng.below(1u << 16) << 16) | rng.below(1u << 16);
  data[0] = 0x7fc01234u;  // a NaN with a payload
  data[1] = 0x00000001u;  // the smallest denormal
  vk::Buffer src = words(data, 0, n), dst = words({}, 0, n);
  vk::Recorder rec(ctx());
  ops::copy(rec, ops::view(src, {n}, 0, ops::DType::U32), ops::view(dst, {n}, 0, ops::DType::U32));
  rec.submit();
  EXPECT_EQ(readWords(dst, n), data);
}

// 16-bit elements (f16 or bf16, src and dst of one dtype) are copied as their bits: NaN
// payloads, subnormals and infinities too, nothing rounded; at every offset in halves (odd
// ones start 2 bytes into a word), with odd lengths, and nothing outside dst changes.
TEST_F(CopyTest, CopiesSixteenBitElementsBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const ops::DType dtype : {ops::DType::F16, ops::DType::BF16})
    for (CopyVariant variant : {CopyVariant::Auto, CopyVariant::Storage})
      for (int64_t n : {1, 2, 17, 1001})
        for (int64_t src_at : {0, 1, 2, 3, 8}) {
          const int64_t dst_at = (src_at + 3) % 9, total = n + 9;  // in halves
          SCOPED_TRACE(testing::Message()
                       << ops::dtypeName(dtype) << ", " << ops::copyVariantName(variant) << ", n "
                       << n << ", src at " << src_at << ", dst at " << dst_at);
          std::vector<uint16_t> data(n);
          for (auto& h : data) h = uint16_t(rng.below(1u << 16));
          data[0] = dtype == ops::DType::F16 ? 0x7c01 : 0x7f81;  // a signalling NaN's bits
          if (n > 1) data[1] = 0x0001;                           // the smallest subnormal
          std::vector<uint16_t> all((total + 1) / 2 * 2, 0xbeef);
          std::copy(data.begin(), data.end(), all.begin() + src_at);
          vk::Buffer src = ctx().allocator().allocate(all.size() * 2);
          vk::Buffer dst = ctx().allocator().allocate(all.size() * 2);
          ctx().staging().upload(src, 0, all.data(), all.size() * 2);
          std::vector<uint16_t> sentinel(all.size(), 0xbeef);
          ctx().staging().upload(dst, 0, sentinel.data(), sentinel.size() * 2);
          vk::Recorder rec(ctx());
          ops::copy(rec, ops::view(src, {n}, uint64_t(src_at) * 2, dtype),
                    ops::view(dst, {1, n}, uint64_t(dst_at) * 2, dtype), variant);
          rec.submit();
          std::vector<uint16_t> got(all.size());
          ctx().staging().download(dst, 0, got.data(), got.size() * 2);
          for (int64_t i = 0; i < int64_t(got.size()); ++i) {
            const bool inside = i >= dst_at && i < dst_at + n;
            const uint16_t want = inside ? data[i - dst_at] : uint16_t(0xbeef);
            ASSERT_EQ(got[i], want) << "half " << i << (inside ? "" : " (outside dst)");
          }
        }
}

void expectError(vk::Recorder& rec, const std::function<void()>& record,
                 const std::string& message) {
  try {
    record();
    ADD_FAILURE() << "no error, expected: " << message;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

TEST_F(CopyTest, RejectsBadArgumentsBeforeRecording) {
  vk::Buffer a = ctx().allocator().allocate(64 * 4), b = ctx().allocator().allocate(64 * 4);
  vk::Recorder rec(ctx());
  expectError(
      rec,
      [&] {
        ops::copy(rec, ops::view(a, {4, 8}), ops::view(b, {33}));
      },
      "copy: src (4,8) and dst (33) differ in element count");
  expectError(
      rec, [&] { ops::copy(rec, ops::view(a, {8}), ops::view(b, {8}, 0, ops::DType::U32)); },
      "copy: src is f32, dst is u32");
  expectError(
      rec, [&] { ops::copy(rec, ops::view(a, {65}), ops::view(b, {65})); }, "copy: src");
  expectError(
      rec, [&] { ops::copy(rec, ops::view(a, {16}), ops::view(a, {16}, 32)); },
      "copy: dst (16) overlaps src (16)");
  expectError(
      rec,
      [&] {
        ops::copy(rec, ops::view(a, {8}, 0, ops::DType::U32), ops::view(b, {8}, 0, ops::DType::U32),
                  CopyVariant::Texel);
      },
      "cannot be read through an RGBA32F texel view");
  expectError(
      rec, [&] { ops::copy(rec, ops::view(a, {8}), ops::view(b, {8}, 4), CopyVariant::Texel); },
      "dst cannot take 16-byte stores");
  // Between float formats a copy would have to round: that is ops::convert.
  expectError(
      rec, [&] { ops::copy(rec, ops::view(a, {8}), ops::view(b, {8}, 0, ops::DType::BF16)); },
      "copy: src is f32, dst is bf16 (ops::convert changes a float format)");
  expectError(
      rec,
      [&] {
        ops::copy(rec, ops::view(a, {8}, 0, ops::DType::F16),
                  ops::view(b, {8}, 0, ops::DType::BF16));
      },
      "copy: src is f16, dst is bf16 (ops::convert");
  expectError(
      rec,
      [&] {
        ops::copy(rec, ops::view(a, {8}, 0, ops::DType::F16), ops::view(b, {8}, 0, ops::DType::F16),
                  CopyVariant::Texel);
      },
      "cannot be read through an RGBA32F texel view");
}

}  // namespace
}  // namespace vkgrad::test
