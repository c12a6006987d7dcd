// The block allocator: alignment, no overlap, free-list reuse and coalescing,
// dedicated blocks for large buffers, and texel views.
#include "vkgrad/vk/memory.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

constexpr VkDeviceSize kMiB = VkDeviceSize(1) << 20;

class MemoryTest : public VkTest {};

// Every buffer lies inside its block, aligned, and overlaps no other buffer.
void expectDisjoint(const std::vector<vk::Buffer>& buffers, VkDeviceSize alignment) {
  for (const vk::Buffer& b : buffers) {
    EXPECT_EQ(b.offset() % alignment, 0u);
    EXPECT_GE(b.capacity(), b.size());
    EXPECT_EQ(b.capacity() % alignment, 0u);
    EXPECT_LT(b.capacity() - b.size(), alignment);
  }
  std::vector<const vk::Buffer*> sorted;
  for (const vk::Buffer& b : buffers) sorted.push_back(&b);
  std::sort(sorted.begin(), sorted.end(), [](const vk::Buffer* a, const vk::Buffer* b) {
    return a->handle() != b->handle() ? a->handle() < b->handle() : a->offset() < b->offset();
  });
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->handle() == sorted[i - 1]->handle()) {
      EXPECT_LE(sorted[i - 1]->offset() + sorted[i - 1]->capacity(), sorted[i]->offset());
    }
  }
}

TEST_F(MemoryTest, ManyOddSizedAllocationsAreAlignedAndDisjoint) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  vk::Allocator allocator(ctx(), 4 * kMiB);
  EXPECT_GE(allocator.alignment(), 16u);
  EXPECT_EQ(allocator.alignment() % ctx().info().min_storage_offset_alignment, 0u);
  std::vector<vk::Buffer> buffers;
  VkDeviceSize in_use = 0;
  for (int i = 0; i < 300; ++i) {
    const VkDeviceSize bytes = 1 + rng.below(i % 10 == 0 ? 300000 : 5000);
    buffers.push_back(allocator.allocate(bytes));
    EXPECT_EQ(buffers.back().size(), bytes);
    in_use += buffers.back().capacity();
  }
  EXPECT_EQ(allocator.bytesInUse(), in_use);
  EXPECT_GE(allocator.bytesReserved(), in_use);
  EXPECT_EQ(allocator.bytesReserved(), allocator.blockCount() * 4 * kMiB);
  expectDisjoint(buffers, allocator.alignment());

  // Free every other one, allocate again into the holes, and check again.
  for (size_t i = 0; i < buffers.size(); i += 2) buffers[i].reset();
  const size_t blocks = allocator.blockCount();
  for (size_t i = 0; i < buffers.size(); i += 2)
    buffers[i] = allocator.allocate(1 + rng.below(4000));
  EXPECT_EQ(allocator.blockCount(), blocks) << "the holes should have been reused";
  expectDisjoint(buffers, allocator.alignment());
  buffers.clear();
  EXPECT_EQ(allocator.bytesInUse(), 0u);
}

TEST_F(MemoryTest, PeakBytesInUseIsTheHighWaterMark) {
  vk::Allocator allocator(ctx(), 4 * kMiB);
  EXPECT_EQ(allocator.peakBytesInUse(), 0u);
  vk::Buffer a = allocator.allocate(1000), b = allocator.allocate(3000);
  const VkDeviceSize both = a.capacity() + b.capacity();
  EXPECT_EQ(allocator.peakBytesInUse(), both);
  b.reset();
  EXPECT_EQ(allocator.peakBytesInUse(), both) << "freeing keeps the high-water mark";
  allocator.resetPeak();
  EXPECT_EQ(allocator.peakBytesInUse(), a.capacity()) << "a reset starts from what is in use";
  vk::Buffer c = allocator.allocate(5 * kMiB);  // a dedicated block of its own
  EXPECT_EQ(allocator.peakBytesInUse(), a.capacity() + c.capacity());
}

TEST_F(MemoryTest, FreedRangesAreReusedAndCoalesced) {
  vk::Allocator allocator(ctx(), kMiB);
  const VkDeviceSize align = allocator.alignment();
  vk::Buffer a = allocator.allocate(100), b = allocator.allocate(align + 1),
             c = allocator.allocate(7);
  vk::Buffer d = allocator.allocate(1);
  ASSERT_EQ(a.handle(), d.handle());
  const VkDeviceSize a_offset = a.offset(), b_offset = b.offset();
  EXPECT_EQ(b.offset(), a.offset() + align);
  EXPECT_EQ(c.offset(), b.offset() + 2 * align);

  b.reset();
  EXPECT_FALSE(b);
  vk::Buffer again = allocator.allocate(2 * align);  // exactly b's old range, first fit
  EXPECT_EQ(again.offset(), b_offset);
  again.reset();

  // a, b and c free: one range of 4 alignments, where a 4-alignment buffer fits.
  a.reset();
  c.reset();
  vk::Buffer merged = allocator.allocate(4 * align);
  EXPECT_EQ(merged.offset(), a_offset);
  EXPECT_EQ(allocator.blockCount(), 1u);
  EXPECT_EQ(allocator.bytesInUse(), 4 * align + align);  // merged + d
}

// A buffer grows in place over the free range right after it, keeping its data, and not
// over a neighbour; freeing the grown buffer returns all of it.
TEST_F(MemoryTest, GrowsInPlaceOnlyOverFreeMemoryAfterIt) {
  vk::Allocator allocator(ctx(), kMiB);
  const VkDeviceSize align = allocator.alignment();
  vk::Buffer a = allocator.allocate(100);
  const std::vector<uint32_t> words = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
  ctx().staging().upload(a, 0, words.data(), words.size() * 4);
  const VkDeviceSize offset = a.offset();
  EXPECT_TRUE(a.grow(50));  // within its capacity
  EXPECT_EQ(a.size(), 100u);
  EXPECT_TRUE(a.grow(3 * align + 7));
  EXPECT_EQ(a.offset(), offset);
  EXPECT_EQ(a.size(), 3 * align + 7);
  EXPECT_EQ(a.capacity(), 4 * align);
  EXPECT_EQ(allocator.bytesInUse(), 4 * align);
  std::vector<uint32_t> back(words.size());
  ctx().staging().download(a, 0, back.data(), back.size() * 4);
  EXPECT_EQ(back, words);

  vk::Buffer b = allocator.allocate(1);  // right after a
  EXPECT_EQ(b.offset(), offset + 4 * align);
  EXPECT_FALSE(a.grow(4 * align + 1));
  EXPECT_EQ(a.capacity(), 4 * align);
  EXPECT_FALSE(a.grow(2 * kMiB));
  EXPECT_TRUE(b.grow(kMiB - b.offset()));  // to the end of the block
  EXPECT_FALSE(b.grow(kMiB - b.offset() + 1));
  a.reset();
  b.reset();
  EXPECT_EQ(allocator.bytesInUse(), 0u);
  vk::Buffer whole = allocator.allocate(kMiB);  // the block is one free range again
  EXPECT_EQ(allocator.blockCount(), 1u);
}

TEST_F(MemoryTest, LargeBufferGetsADedicatedBlockReleasedOnFree) {
  vk::Allocator allocator(ctx(), kMiB);
  vk::Buffer small = allocator.allocate(1000);
  ASSERT_EQ(allocator.blockCount(), 1u);
  const VkDeviceSize reserved = allocator.bytesReserved();
  {
    vk::Buffer large = allocator.allocate(3 * kMiB + 5);
    EXPECT_EQ(allocator.blockCount(), 2u);
    EXPECT_NE(large.handle(), small.handle());
    EXPECT_EQ(large.offset(), 0u);
    EXPECT_GE(allocator.bytesReserved(), reserved + 3 * kMiB + 5);
    // A later small buffer goes to the shared block, not the dedicated one.
    vk::Buffer other = allocator.allocate(10);
    EXPECT_EQ(other.handle(), small.handle());
  }
  EXPECT_EQ(allocator.blockCount(), 1u);
  EXPECT_EQ(allocator.bytesReserved(), reserved);
  vk::Buffer large = allocator.allocate(2 * kMiB);
  EXPECT_EQ(allocator.blockCount(), 2u);
  large.reset();
  EXPECT_EQ(allocator.blockCount(), 1u);
}

// A memory limit makes running out deterministic: the allocation past it throws
// OutOfMemoryError with the sizes, and the Context goes on working within it.
TEST(MemoryLimit, OutOfMemoryIsAClearErrorAndTheContextStaysUsable) {
  vk::ContextOptions options;
  options.validation = true;
  options.memory_limit = 8 * kMiB;
  vk::Context context(options);
  vk::Allocator& allocator = context.allocator();
  EXPECT_EQ(allocator.limit(), 8 * kMiB);
  std::vector<vk::Buffer> held;
  held.push_back(allocator.allocate(5 * kMiB));
  try {
    held.push_back(allocator.allocate(4 * kMiB));
    ADD_FAILURE() << "no OutOfMemoryError past the limit";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("VK_ERROR_OUT_OF_DEVICE_MEMORY"), std::string::npos) << what;
    EXPECT_NE(what.find("4194304-byte buffer"), std::string::npos) << what;
    EXPECT_NE(what.find("of the 8 MiB memory limit"), std::string::npos) << what;
  }
  EXPECT_EQ(allocator.bytesInUse(), held[0].capacity());
  // Still usable: what fits is allocated, written and read back.
  vk::Buffer small = allocator.allocate(kMiB);
  Rng rng;
  const std::vector<float> data = rng.uniform(1000);
  context.staging().upload(small, 0, data.data(), data.size() * 4);
  std::vector<float> back(data.size());
  context.staging().download(small, 0, back.data(), back.size() * 4);
  EXPECT_EQ(back, data);
  held.clear();
  EXPECT_NO_THROW(held.push_back(allocator.allocate(6 * kMiB)));
  EXPECT_TRUE(context.validationMessages().empty());
}

TEST(MemoryLimit, ParsesSizesAndNamesABadOne) {
  EXPECT_EQ(vk::parseMemorySize("512M", "x"), 512 * kMiB);
  EXPECT_EQ(vk::parseMemorySize("2G", "x"), 2048 * kMiB);
  EXPECT_EQ(vk::parseMemorySize("4096", "x"), 4096u);
  for (const char* bad : {"", "0", "12X", "M", "-1", "1.5G", "99999999999999G"}) {
    try {
      vk::parseMemorySize(bad, "VKGRAD_MEMORY_LIMIT");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("VKGRAD_MEMORY_LIMIT='" + std::string(bad) + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

// Lowered limits (ContextOptions::limits, VKGRAD_LIMITS) are what the engine believes: the
// Context's DeviceInfo reports them, a buffer larger than one allocation is refused naming
// the limit, and the shared blocks and the staging buffer shrink to fit under it.
TEST(DeviceLimits, LoweredLimitsAreWhatTheEngineSees) {
  const vk::DeviceLimits parsed = vk::parseDeviceLimits("allocation=1M,storage=64K", "x");
  EXPECT_EQ(parsed.max_allocation_bytes, kMiB);
  EXPECT_EQ(parsed.max_storage_buffer_range, VkDeviceSize(64) << 10);
  for (const char* bad : {"", "alloc=1M", "storage", "storage=1M,", "allocation=1.5M"}) {
    try {
      vk::parseDeviceLimits(bad, "VKGRAD_LIMITS");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("VKGRAD_LIMITS"), std::string::npos) << e.what();
    }
  }
  vk::ContextOptions options;
  options.validation = true;
  options.limits = parsed;
  vk::Context context(options);
  EXPECT_EQ(context.info().max_allocation_bytes, kMiB);
  EXPECT_EQ(context.info().max_storage_buffer_range, VkDeviceSize(64) << 10);
  vk::Allocator& allocator = context.allocator();
  try {
    allocator.allocate(kMiB + 1, vk::Use::Activations);
    ADD_FAILURE() << "a buffer past one allocation";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1048577-byte buffer (activations (graph arenas)) is "
                                         "larger than one allocation"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("maxMemoryAllocationSize 1048576 bytes"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(allocator.bytesInUse(), 0u);
  // Three buffers of 600 KiB: each shared block is at most 1 MiB, so three blocks.
  std::vector<vk::Buffer> held;
  for (int i = 0; i < 3; ++i) held.push_back(allocator.allocate(600 << 10));
  EXPECT_EQ(allocator.blockCount(), 3u);
  EXPECT_LE(allocator.bytesReserved(), 3 * kMiB);
  // A whole allocation's worth goes through the staging buffer and back.
  vk::Buffer whole = allocator.allocate(kMiB);
  Rng rng;
  const std::vector<float> data = rng.uniform(kMiB / 4);
  context.staging().upload(whole, 0, data.data(), kMiB);
  std::vector<float> back(data.size());
  context.staging().download(whole, 0, back.data(), kMiB);
  EXPECT_EQ(back, data);
  EXPECT_TRUE(context.validationMessages().empty());
}

TEST_F(MemoryTest, ZeroBytesThrows) {
  EXPECT_THROW(ctx().allocator().allocate(0), Error);
}

TEST_F(MemoryTest, BuffersMoveAndHoldTheirData) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // Neighbouring buffers keep their own contents (no overlap in practice, not just on paper).
  std::vector<vk::Buffer> buffers;
  std::vector<std::vector<float>> data;
  for (int i = 0; i < 20; ++i) {
    data.push_back(rng.uniform(1 + rng.below(300)));
    buffers.push_back(ctx().allocator().allocate(data.back().size() * 4));
    ctx().staging().upload(buffers.back(), 0, data.back().data(), data.back().size() * 4);
  }
  vk::Buffer moved = std::move(buffers[3]);
  EXPECT_FALSE(buffers[3]);
  EXPECT_EQ(buffers[3].handle(), VK_NULL_HANDLE);
  buffers[3] = std::move(moved);
  EXPECT_FALSE(moved);
  for (size_t i = 0; i < buffers.size(); ++i) {
    std::vector<float> back(data[i].size());
    ctx().staging().download(buffers[i], 0, back.data(), back.size() * 4);
    EXPECT_EQ(back, data[i]) << "buffer " << i;
  }
  const VkDeviceSize before = ctx().allocator().bytesInUse();
  const VkDeviceSize freed = buffers[0].capacity();
  buffers[0] = std::move(buffers[1]);  // releases buffers[0]'s range
  EXPECT_EQ(ctx().allocator().bytesInUse(), before - freed);
}

TEST_F(MemoryTest, TexelViewsAreCachedAndChecked) {
  vk::Buffer buffer = ctx().allocator().allocate(1000);
  const VkBufferView whole = buffer.texelView(vk::TexelFormat::Rgba32f, 0, buffer.capacity());
  EXPECT_NE(whole, VK_NULL_HANDLE);
  EXPECT_EQ(buffer.texelView(vk::TexelFormat::Rgba32f, 0, buffer.capacity()), whole);
  EXPECT_NE(buffer.texelView(vk::TexelFormat::R32f, 0, 1000), whole);
  EXPECT_THROW(buffer.texelView(vk::TexelFormat::Rgba32f, 0, buffer.capacity() + 16), Error);
  EXPECT_THROW(buffer.texelView(vk::TexelFormat::Rgba32f, 0, 1000 + 4), Error);  // not whole texels
  EXPECT_EQ(vk::texelBytes(vk::TexelFormat::R32f), 4u);
  EXPECT_EQ(vk::texelBytes(vk::TexelFormat::Rgba32f), 16u);
}

}  // namespace
}  // namespace vkgrad::test
