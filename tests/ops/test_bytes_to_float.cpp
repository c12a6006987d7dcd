#include "vkgrad/ops/bytes_to_float.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/bytes_to_float.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using ops::DType;
using ops::Shape;

constexpr uint32_t kSentinel = 0xdeadbeefu;

class BytesToFloatTest : public VkTest {
 protected:
  // data at word `at` of a buffer of `total` words whose other words hold the sentinel.
  static vk::Buffer words(const std::vector<uint32_t>& data, int64_t at, int64_t total) {
    std::vector<uint32_t> all(size_t(total), kSentinel);
    std::memcpy(all.data() + at, data.data(), data.size() * 4);
    vk::Buffer b = ctx().allocator().allocate(all.size() * 4);
    ctx().staging().upload(b, 0, all.data(), all.size() * 4);
    return b;
  }
};

// Random words (every byte value, high bits included) of odd row counts and row lengths, at
// odd word offsets; out both on and off a whole vec4 of its binding (the two store paths),
// NaN around it so a stray write shows. The GPU rounds byte * scale and then + shift in f32
// (two roundings, or one when fused), the reference once from double: at most ~2 ulp of the
// largest |value|, so 1e-6 normalised error; a wrong byte order or a missed word is O(1).
TEST_F(BytesToFloatTest, MatchesCpuOnOddShapesAndOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Case {
    int64_t rows, row_words, words_at, out_pad;
  };
  const Case cases[] = {
      {1, 1, 0, 4}, {7, 49, 3, 5}, {13, 5, 1, 8}, {3, 196, 0, 2}, {1001, 3, 7, 3}};
  for (const auto [rows, row_words, words_at, pad] : cases) {
    SCOPED_TRACE(testing::Message() << "rows " << rows << ", words per row " << row_words
                                    << ", words at " << words_at << ", out pad " << pad);
    const int64_t n_words = rows * row_words;
    const auto data = rng.below(size_t(n_words), 0xFFFFFFFFu);
    const float scale = rng.uniform(1, 0.001f, 0.1f)[0], shift = rng.uniform(1)[0];
    std::vector<float> want(size_t(4 * n_words));
    ops::ref::bytesToFloat(data.data(), want.data(), n_words, scale, shift);
    const vk::Buffer w = words(data, words_at, n_words + words_at + 2);
    const DeviceTensor out = paddedUpload(ctx(), std::vector<float>(want.size(), NAN), pad);
    vk::Recorder rec(ctx());
    ops::bytesToFloat(rec, ops::view(w, {rows, row_words}, uint64_t(words_at) * 4, DType::U32),
                      ops::view(out.buffer, {rows, 4 * row_words}, uint64_t(pad) * 4), scale,
                      shift);
    rec.submit();
    const auto all = download(ctx(), out);
    EXPECT_TRUE(padsUntouched(all, pad));
    EXPECT_TRUE(allClose(unpadded(all, pad), want, 1e-6));
  }
}

// The host's layout: bytes copied into words as they are (memcpy, little-endian) come back
// as the same numbers, exactly, in the same order, for an (N,28,28) image batch.
TEST_F(BytesToFloatTest, BytesCopiedIntoWordsComeBackInOrder) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t images = 5, pixels = 28 * 28;
  const auto values = rng.below(size_t(images * pixels), 256);
  std::vector<uint8_t> bytes(values.begin(), values.end());
  std::vector<uint32_t> packed(bytes.size() / 4);
  std::memcpy(packed.data(), bytes.data(), bytes.size());
  const vk::Buffer w = words(packed, 0, int64_t(packed.size()));
  const DeviceTensor out = poisoned(ctx(), {images, 28, 28});
  vk::Recorder rec(ctx());
  ops::bytesToFloat(rec, ops::view(w, {images, pixels / 4}, 0, DType::U32), out.view(), 1.0f);
  rec.submit();
  const auto got = download(ctx(), out);
  for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(got[i], float(bytes[i])) << "byte " << i;
}

// out in f16 or bf16: the f32 value of the test above (1e-6 of the largest) rounded once as
// it is stored (closeInFormat), out 2 bytes into its buffer (an odd element skip); and pixel
// values with scale 1 exact in both (0..255 need 8 significant bits: bf16 has them).
TEST_F(BytesToFloatTest, SixteenBitOutputsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const DType dtype : {DType::F16, DType::BF16}) {
    SCOPED_TRACE(ops::dtypeName(dtype));
    const int64_t rows = 7, row_words = 49, n_words = rows * row_words;
    const auto data = rng.below(size_t(n_words), 0xFFFFFFFFu);
    const float scale = rng.uniform(1, 0.001f, 0.1f)[0], shift = rng.uniform(1)[0];
    std::vector<float> want(size_t(4 * n_words)), bytes(size_t(4 * n_words));
    ops::ref::bytesToFloat(data.data(), want.data(), n_words, scale, shift);
    ops::ref::bytesToFloat(data.data(), bytes.data(), n_words, 1.0f, 0.0f);
    const vk::Buffer w = words(data, 1, n_words + 1);
    const auto words_view = ops::view(w, {rows, row_words}, 4, DType::U32);
    auto out = shiftedPoisoned(ctx(), {rows, 4 * row_words}, dtype);
    auto pixels = poisoned(ctx(), {rows, 4 * row_words}, dtype);
    vk::Recorder rec(ctx());
    ops::bytesToFloat(rec, words_view, out.view, scale, shift);
    ops::bytesToFloat(rec, words_view, pixels.view(), 1.0f);
    rec.submit();
    EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), out), want, dtype, 1e-6));
    EXPECT_TRUE(allClose(download(ctx(), pixels), bytes, 0.0));
  }
}

TEST_F(BytesToFloatTest, BadShapesThrowBeforeRecording) {
  const vk::Buffer w = words(std::vector<uint32_t>(64, 1), 0, 64);
  const DeviceTensor out = poisoned(ctx(), {256});
  auto record = [&](Shape words_shape, Shape out_shape, DType dtype = DType::U32,
                    uint64_t out_offset = 0) {
    return [=, &w, &out](vk::Recorder& rec) {
      ops::bytesToFloat(rec, ops::view(w, words_shape, 0, dtype),
                        ops::view(out.buffer, out_shape, out_offset), 1.0f);
    };
  };
  expectShapeError(ctx(), record({3, 5}, {3, 19}),
                   "bytesToFloat: words (3,5), out (3,19): out must hold 4 x 15 = 60 elements");
  expectShapeError(ctx(), record({3, 5}, {5, 12}), "out's leading dim must be words' (3)");
  expectShapeError(ctx(), record({3, 5}, {3, 20}, DType::F32), "words must be u32, got f32");
  expectShapeError(ctx(), record({64}, {64, 4}, DType::U32, 4),
                   "out (64,4) at offset 4 needs 1028 bytes");
  // out written over the words it reads.
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::bytesToFloat(rec, ops::view(out.buffer, {8, 4}, 0, DType::U32),
                          ops::view(out.buffer, {8, 16}), 1.0f);
      },
      "out (8,16) overlaps words (8,4)");
}

}  // namespace
}  // namespace vkgrad::test
