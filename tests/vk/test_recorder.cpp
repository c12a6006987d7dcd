// The recorder: barriers exactly where dispatches depend on each other, fill and copy,
// replaying a recording, the recording state machine, timestamps and argument checks.
// The dispatches are naive matmuls, checked against the CPU product.
#include "vkgrad/vk/recorder.h"

#include <cstring>
#include <vector>

#include "common/compare.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/reference/matmul.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

class RecorderTest : public VkTest {
 protected:
  struct Matrix {
    vk::Buffer buffer;
    uint32_t rows, cols;
    std::vector<float> host;
  };

  Matrix random(uint32_t rows, uint32_t cols) {
    Matrix m{ctx().allocator().allocate(rows * cols * 4), rows, cols, rng_.uniform(rows * cols)};
    ctx().staging().upload(m.buffer, 0, m.host.data(), rows * cols * 4);
    return m;
  }
  Matrix empty(uint32_t rows, uint32_t cols) {
    Matrix m{ctx().allocator().allocate(rows * cols * 4), rows, cols, {}};
    std::vector<float> nan(rows * cols, std::nanf(""));
    ctx().staging().upload(m.buffer, 0, nan.data(), nan.size() * 4);
    return m;
  }
  std::vector<float> download(const Matrix& m) {
    std::vector<float> out(m.rows * m.cols);
    ctx().staging().download(m.buffer, 0, out.data(), out.size() * 4);
    return out;
  }
  // c = a·b, one dispatch; the host copy of c gets the CPU product.
  void matmul(vk::Recorder& rec, const Matrix& a, const Matrix& b, Matrix& c) {
    ops::matmul(rec, ops::view(a.buffer, {a.rows, a.cols}), ops::view(b.buffer, {b.rows, b.cols}),
                ops::view(c.buffer, {c.rows, c.cols}), ops::MatmulVariant::Naive);
    c.host.resize(a.rows * b.cols);
    ops::ref::matmul(a.host.data(), b.host.data(), c.host.data(), a.rows, b.cols, a.cols);
  }

  Rng rng_;
};

TEST_F(RecorderTest, BarriersOnlyBetweenDependentDispatches) {
  SCOPED_TRACE(rng_.describe());
  Matrix a = random(19, 13), b1 = random(13, 7), b2 = random(13, 7), e = random(7, 5);
  Matrix c1 = empty(19, 7), c2 = empty(19, 7), d = empty(19, 5), f = empty(19, 7);
  vk::Recorder rec(ctx());
  matmul(rec, a, b1, c1);
  matmul(rec, a, b2, c2);  // reads a too, writes elsewhere: independent
  EXPECT_EQ(rec.barrierCount(), 0u);
  matmul(rec, c1, e, d);  // reads c1, written above
  EXPECT_EQ(rec.barrierCount(), 1u);
  matmul(rec, a, b2, f);  // independent of everything since that barrier
  EXPECT_EQ(rec.barrierCount(), 1u);
  EXPECT_EQ(rec.dispatchCount(), 4u);
  rec.submit();
  for (const Matrix* m : {&c1, &c2, &d, &f}) EXPECT_TRUE(allClose(download(*m), m->host, 1e-5));
}

TEST_F(RecorderTest, WriteAfterReadAndWriteAfterWriteGetBarriers) {
  Matrix a = random(5, 3), b = random(3, 4), c = empty(5, 4);
  vk::Recorder rec(ctx());
  matmul(rec, a, b, c);
  rec.fill(a.buffer, 0);  // overwrites what the dispatch reads
  EXPECT_EQ(rec.barrierCount(), 1u);
  rec.fill(a.buffer, 0);  // overwrites what the fill wrote
  EXPECT_EQ(rec.barrierCount(), 2u);
  rec.fill(b.buffer, 0);  // untouched since the last barrier
  EXPECT_EQ(rec.barrierCount(), 2u);
  rec.submit();
  EXPECT_TRUE(allClose(download(c), c.host, 1e-5));
  for (float x : download(a)) EXPECT_EQ(x, 0.0f);
}

TEST_F(RecorderTest, FillAndCopyRanges) {
  vk::Buffer src = ctx().allocator().allocate(100), dst = ctx().allocator().allocate(64);
  vk::Recorder rec(ctx());
  rec.fill(src, 0x01020304u);
  rec.fill(src, 0xdeadbeefu, 8, 40);
  rec.fill(dst, 0);
  rec.copy(src, 4, dst, 12, 48);
  EXPECT_EQ(rec.barrierCount(), 2u);  // fill after fill of src; copy reads the fills
  rec.submit();
  uint32_t want[16] = {}, got[16];
  want[3] = 0x01020304u;
  for (int i = 4; i < 14; ++i) want[i] = 0xdeadbeefu;
  want[14] = 0x01020304u;
  ctx().staging().download(dst, 0, got, sizeof(got));
  for (int i = 0; i < 16; ++i) EXPECT_EQ(got[i], want[i]) << "word " << i;

  vk::Recorder bad(ctx());
  EXPECT_THROW(bad.fill(src, 0, 2, 8), Error);   // offset not a multiple of 4
  EXPECT_THROW(bad.fill(src, 0, 0, 6), Error);   // size not a multiple of 4
  EXPECT_THROW(bad.fill(src, 0, 96, 8), Error);  // past the end
  EXPECT_THROW(bad.copy(src, 0, dst, 0, 65), Error);
  EXPECT_THROW(bad.copy(src, 60, dst, 0, 41), Error);
  EXPECT_THROW(bad.copy(vk::Buffer{}, 0, dst, 0, 4), Error);
  EXPECT_EQ(bad.barrierCount(), 0u);
}

TEST_F(RecorderTest, ReplaysARecording) {
  SCOPED_TRACE(rng_.describe());
  Matrix a = random(17, 9), b = random(9, 11), c = empty(17, 11);
  vk::Recorder rec(ctx());
  matmul(rec, a, b, c);
  rec.submit();
  EXPECT_TRUE(allClose(download(c), c.host, 1e-5));
  // New inputs, same command buffer.
  a.host = rng_.uniform(a.host.size());
  ctx().staging().upload(a.buffer, 0, a.host.data(), a.host.size() * 4);
  ops::ref::matmul(a.host.data(), b.host.data(), c.host.data(), 17, 11, 9);
  rec.submit();
  EXPECT_TRUE(allClose(download(c), c.host, 1e-5));
  EXPECT_EQ(rec.dispatchCount(), 1u);
}

TEST_F(RecorderTest, RecordingAfterSubmitNeedsReset) {
  Matrix a = random(4, 4), b = random(4, 4), c = empty(4, 4);
  vk::Recorder rec(ctx());
  matmul(rec, a, b, c);
  rec.fill(a.buffer, 0);
  rec.submit();
  EXPECT_THROW(matmul(rec, a, b, c), Error);
  EXPECT_THROW(rec.fill(a.buffer, 0), Error);
  EXPECT_THROW(rec.copy(a.buffer, 0, b.buffer, 0, 16), Error);
  try {
    rec.timestamp();
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("call reset()"), std::string::npos) << e.what();
  }
  rec.reset();
  EXPECT_EQ(rec.dispatchCount(), 0u);
  EXPECT_EQ(rec.barrierCount(), 0u);
  a.host = rng_.uniform(16);
  ctx().staging().upload(a.buffer, 0, a.host.data(), 64);
  matmul(rec, a, b, c);
  rec.submit();
  EXPECT_TRUE(allClose(download(c), c.host, 1e-5));
}

TEST_F(RecorderTest, TimestampsIncrease) {
  Matrix a = random(64, 64), b = random(64, 64), c = empty(64, 64), d = empty(64, 64);
  vk::Recorder rec(ctx());
  EXPECT_THROW(rec.milliseconds(0, 1), Error);  // nothing submitted yet
  const uint32_t t0 = rec.timestamp();
  matmul(rec, a, b, c);
  const uint32_t t1 = rec.timestamp();
  matmul(rec, c, b, d);
  const uint32_t t2 = rec.timestamp();
  rec.submit();
  EXPECT_GT(rec.milliseconds(t0, t1), 0.0);
  EXPECT_GT(rec.milliseconds(t1, t2), 0.0);
  EXPECT_NEAR(rec.milliseconds(t0, t2), rec.milliseconds(t0, t1) + rec.milliseconds(t1, t2), 1e-6);
  EXPECT_LT(rec.milliseconds(t0, t2), 60e3);
  EXPECT_THROW(rec.milliseconds(t0, t2 + 1), Error);
  // A replay measures again.
  rec.submit();
  EXPECT_GT(rec.milliseconds(t0, t2), 0.0);
}

TEST_F(RecorderTest, DispatchArgumentsAreCheckedBeforeRecording) {
  Matrix a = random(6, 6), b = random(6, 6), c = empty(6, 6);
  // matmul/naive binds a, b, c, the bias and the residual; where the device binds 4 storage
  // buffers (Vulkan's minimum) its ".sb4" build, without the residual: the checks are the
  // subject here, not the kernel.
  const bool four = ctx().info().max_storage_buffers < 5;
  vk::SpecConstants spec{{"local_size_x", 8u}, {"local_size_y", 8u}, {"a_dtype", 0u},
                         {"b_dtype", 0u},      {"c_dtype", 0u},      {"bias_dtype", 0u}};
  if (!four) spec.insert(spec.end(), {{"RESIDUAL", false}, {"residual_dtype", 0u}});
  const vk::Kernel& kernel = ctx().kernels().get(four ? "matmul/naive.sb4" : "matmul/naive", spec);
  const uint32_t push[33] = {6, 6, 6};  // the contents do not matter: nothing is recorded
  vk::Recorder rec(ctx());
  const vk::Arg two[] = {a.buffer, b.buffer};
  EXPECT_THROW(rec.dispatch(kernel, two, push, 12, 6, 6), Error);
  // a, b, c, then the bias and the residual (any valid buffer: nothing runs), c replaced.
  auto withC = [&](const vk::Arg& at_c) {
    std::vector<vk::Arg> args{a.buffer, b.buffer, at_c, a.buffer};
    if (!four) args.push_back(a.buffer);
    return args;
  };
  const std::vector<vk::Arg> all = withC(c.buffer);
  EXPECT_THROW(rec.dispatch(kernel, all, push, sizeof(push), 6, 6), Error);  // 132 bytes
  EXPECT_THROW(rec.dispatch(kernel, all, push, 12, 0, 6), Error);            // no threads
  const uint64_t too_many = uint64_t(ctx().info().max_workgroup_count[0]) + 1;
  EXPECT_THROW(rec.dispatch(kernel, all, push, 12, too_many * kernel.localSize(0), 6), Error);
  EXPECT_THROW(rec.dispatchGroups(kernel, all, push, 12, 1, 0), Error);
  const std::vector<vk::Arg> overrun = withC({c.buffer, 0, c.buffer.size() + 4});
  EXPECT_THROW(rec.dispatch(kernel, overrun, push, 12, 6, 6), Error);
  const std::vector<vk::Arg> misaligned = withC({c.buffer, 2, 16});
  EXPECT_THROW(rec.dispatch(kernel, misaligned, push, 12, 6, 6), Error);
  EXPECT_EQ(rec.dispatchCount(), 0u);
  EXPECT_EQ(rec.barrierCount(), 0u);
  // The recorder is still usable.
  Matrix d = empty(6, 6);
  matmul(rec, a, b, d);
  rec.submit();
  EXPECT_TRUE(allClose(download(d), d.host, 1e-5));
}

// More dispatches than one descriptor pool holds, into disjoint ranges of one buffer.
TEST_F(RecorderTest, ManyDispatchesInOneRecording) {
  SCOPED_TRACE(rng_.describe());
  constexpr uint32_t kDispatches = 600, kN = 3;
  const VkDeviceSize stride = ctx().allocator().alignment();
  Matrix a = random(kN, kN), b = random(kN, kN);
  vk::Buffer out = ctx().allocator().allocate(kDispatches * stride);
  std::vector<float> want(kN * kN);
  ops::ref::matmul(a.host.data(), b.host.data(), want.data(), kN, kN, kN);
  vk::Recorder rec(ctx());
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "first recording" : "after reset");
    for (uint32_t i = 0; i < kDispatches; ++i)
      ops::matmul(rec, ops::view(a.buffer, {kN, kN}), ops::view(b.buffer, {kN, kN}),
                  ops::view(out, {kN, kN}, i * stride), ops::MatmulVariant::Naive);
    EXPECT_EQ(rec.barrierCount(), 0u);
    EXPECT_EQ(rec.dispatchCount(), kDispatches);
    rec.submit();
    std::vector<float> got(kN * kN);
    for (uint32_t i = 0; i < kDispatches; i += 37) {
      ctx().staging().download(out, i * stride, got.data(), got.size() * 4);
      EXPECT_TRUE(allClose(got, want, 1e-6)) << "dispatch " << i;
    }
    rec.reset();
    rec.fill(out, 0);
    rec.submit();
    rec.reset();
  }
}

}  // namespace
}  // namespace vkgrad::test
