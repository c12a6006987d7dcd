// Host <-> device copies: exact bytes at odd sizes and offsets, transfers larger than
// the staging buffer (chunked), and range checks that throw before any copy.
#include "vkgrad/vk/staging.h"

#include <cstring>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::test {
namespace {

constexpr VkDeviceSize kStagingBytes = VkDeviceSize(16) << 20;  // Staging's default size

class StagingTest : public VkTest {};

std::vector<uint8_t> randomBytes(Rng& rng, size_t n) {
  std::vector<uint8_t> out(n);
  for (size_t i = 0; i < n; i += 4) {
    const uint32_t word = rng.below(UINT32_MAX);
    std::memcpy(&out[i], &word, std::min<size_t>(4, n - i));
  }
  return out;
}

TEST_F(StagingTest, RoundTripsOddSizesAtOddOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const VkDeviceSize sizes[] = {1, 3, 4, 5, 255, 1023, 4097, 65537, 1000003};
  const VkDeviceSize offsets[] = {0, 1, 7, 4096 + 3};
  for (VkDeviceSize size : sizes) {
    for (VkDeviceSize offset : offsets) {
      SCOPED_TRACE(testing::Message() << size << " bytes at offset " << offset);
      vk::Buffer buffer = ctx().allocator().allocate(offset + size + 9);
      const auto around = randomBytes(rng, buffer.size());
      ctx().staging().upload(buffer, 0, around.data(), around.size());
      const auto data = randomBytes(rng, size);
      ctx().staging().upload(buffer, offset, data.data(), size);
      std::vector<uint8_t> back(size);
      ctx().staging().download(buffer, offset, back.data(), size);
      EXPECT_EQ(back, data);
      // The bytes around the range are untouched.
      std::vector<uint8_t> whole(buffer.size()), want = around;
      std::memcpy(&want[offset], data.data(), size);
      ctx().staging().download(buffer, 0, whole.data(), whole.size());
      EXPECT_EQ(whole, want);
    }
  }
}

TEST_F(StagingTest, TransfersLargerThanTheStagingBufferGoInChunks) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const VkDeviceSize size = 2 * kStagingBytes + 12345, offset = 4093;
  vk::Buffer buffer = ctx().allocator().allocate(offset + size + 3);
  const auto data = randomBytes(rng, size);
  ctx().staging().upload(buffer, offset, data.data(), size);
  std::vector<uint8_t> back(size);
  ctx().staging().download(buffer, offset, back.data(), size);
  // EXPECT_EQ on 32 MiB vectors would print all of them on failure.
  EXPECT_TRUE(back == data);
  // A range that straddles a chunk boundary of the upload, read on its own.
  const VkDeviceSize at = kStagingBytes - 1001;
  std::vector<uint8_t> slice(3000);
  ctx().staging().download(buffer, offset + at, slice.data(), slice.size());
  EXPECT_EQ(0, std::memcmp(slice.data(), &data[at], slice.size()));
}

TEST_F(StagingTest, OutOfRangeTransfersThrowAndCopyNothing) {
  Rng rng;
  vk::Buffer buffer = ctx().allocator().allocate(100);
  const auto data = randomBytes(rng, 100);
  ctx().staging().upload(buffer, 0, data.data(), 100);
  std::vector<uint8_t> big(200, 0xab);
  EXPECT_THROW(ctx().staging().upload(buffer, 0, big.data(), 101), Error);
  EXPECT_THROW(ctx().staging().upload(buffer, 1, big.data(), 100), Error);
  EXPECT_THROW(ctx().staging().upload(buffer, 101, big.data(), 0), Error);
  EXPECT_THROW(ctx().staging().upload(buffer, UINT64_MAX, big.data(), 2), Error);
  EXPECT_THROW(ctx().staging().download(buffer, 99, big.data(), 2), Error);
  EXPECT_THROW(ctx().staging().upload(vk::Buffer{}, 0, big.data(), 1), Error);
  try {
    ctx().staging().upload(buffer, 50, big.data(), 60);
    ADD_FAILURE() << "60 bytes at offset 50 of 100 were accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "upload of 60 bytes at offset 50 does not fit a 100-byte buffer");
  }
  // The capacity past size() is padding, not addressable data.
  EXPECT_GT(buffer.capacity(), buffer.size());
  std::vector<uint8_t> back(100);
  ctx().staging().download(buffer, 0, back.data(), 100);
  EXPECT_EQ(back, data);
}

TEST_F(StagingTest, ZeroByteTransfersAreNoOps) {
  vk::Buffer buffer = ctx().allocator().allocate(16);
  uint8_t byte = 0;
  ctx().staging().upload(buffer, 16, &byte, 0);
  ctx().staging().download(buffer, 0, &byte, 0);
  EXPECT_EQ(byte, 0);
}

// One count per call (a chunked transfer is one), bytes exact; rejected and empty calls are
// not counted; resetCounts() starts again from zero.
TEST_F(StagingTest, CountsTransfersAndBytes) {
  vk::Staging& staging = ctx().staging();
  vk::Buffer buffer = ctx().allocator().allocate(kStagingBytes + 100);
  std::vector<uint8_t> data(kStagingBytes + 100, 0x5a);
  staging.resetCounts();
  staging.upload(buffer, 0, data.data(), data.size());  // two chunks, one upload
  staging.upload(buffer, 3, data.data(), 7);
  staging.download(buffer, 1, data.data(), 12);
  staging.upload(buffer, 0, data.data(), 0);
  EXPECT_THROW(staging.download(buffer, 0, data.data(), data.size() + 1), Error);
  const vk::TransferCounts counts = staging.counts();
  EXPECT_EQ(counts.uploads, 2u);
  EXPECT_EQ(counts.upload_bytes, kStagingBytes + 100 + 7);
  EXPECT_EQ(counts.downloads, 1u);
  EXPECT_EQ(counts.download_bytes, 12u);
  staging.resetCounts();
  EXPECT_EQ(staging.counts().uploads + staging.counts().downloads, 0u);
  EXPECT_EQ(staging.counts().upload_bytes + staging.counts().download_bytes, 0u);
}

}  // namespace
}  // namespace vkgrad::test
