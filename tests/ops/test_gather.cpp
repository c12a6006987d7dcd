#include "vkgrad/ops/gather.h"

#include <cstring>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/gather.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

class GatherTest : public VkTest {
 protected:
  static vk::Buffer words(std::span<const uint32_t> data) { return uploadWords(ctx(), data); }
  static std::vector<uint32_t> readWords(const vk::Buffer& b, size_t n) {
    return downloadWords(ctx(), b, n);
  }
  static ops::TensorView u32(const vk::Buffer& b, ops::Shape shape) {
    return ops::view(b, shape, 0, ops::DType::U32);
  }
  static vk::Buffer zeroStatus() { return words(std::vector<uint32_t>{0, 0}); }
};

// (B, T, V, D): odd sizes, a vocabulary smaller than n (repeats, so the backward pass
// really adds) and larger (unused rows, which the backward must zero or leave alone).
struct Case {
  int64_t b, t, vocab, dim;
};
const Case kCases[] = {
    {1, 1, 1, 1}, {3, 17, 5, 7}, {2, 129, 65, 33}, {1, 4099, 1000, 3}, {4, 9, 301, 64}};

std::vector<uint32_t> randomIds(Rng& rng, int64_t n, int64_t vocab) {
  std::vector<uint32_t> ids(n);
  for (auto& id : ids) id = rng.below(uint32_t(vocab));
  return ids;
}

TEST_F(GatherTest, ForwardMatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto [b, t, vocab, dim] : kCases) {
    SCOPED_TRACE(testing::Message() << "B=" << b << " T=" << t << " V=" << vocab << " D=" << dim);
    const int64_t n = b * t;
    const auto ids = randomIds(rng, n, vocab);
    const auto table = rng.uniform(vocab * dim);
    std::vector<float> want(n * dim);
    ops::ref::gather(ids.data(), table.data(), want.data(), n, vocab, dim);
    auto d_ids = words(ids), status = zeroStatus();
    auto d_table = upload(ctx(), {vocab, dim}, table);
    auto out = poisoned(ctx(), {b, t, dim});
    vk::Recorder rec(ctx());
    ops::gather(rec, u32(d_ids, {b, t}), d_table.view(), out.view(), u32(status, {2}));
    rec.submit();
    const auto got = download(ctx(), out);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));  // a gather: exact
    EXPECT_EQ(readWords(status, 2), (std::vector<uint32_t>{0, 0}));
  }
}

class GatherBackwardTest
    : public GatherTest,
      public ::testing::WithParamInterface<std::tuple<ops::GatherBackwardVariant, ops::Write>> {};

TEST_P(GatherBackwardTest, MatchesCpuOnOddShapes) {
  const auto [variant, write] = GetParam();
  const bool accumulate = write == ops::Write::Accumulate;
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto [b, t, vocab, dim] : kCases) {
    SCOPED_TRACE(testing::Message() << "B=" << b << " T=" << t << " V=" << vocab << " D=" << dim);
    const int64_t n = b * t;
    const auto ids = randomIds(rng, n, vocab);
    const auto dout = rng.uniform(n * dim);
    std::vector<float> want = rng.uniform(vocab * dim);
    auto dtable = accumulate ? upload(ctx(), {vocab, dim}, want) : poisoned(ctx(), {vocab, dim});
    ops::ref::gatherBackward(ids.data(), dout.data(), want.data(), n, vocab, dim, accumulate);
    auto d_ids = words(ids), status = zeroStatus();
    auto scratch = words(std::vector<uint32_t>(ops::gatherBackwardScratch(vocab, n), 0xDEADBEEF));
    auto d_dout = upload(ctx(), {b, t, dim}, dout);
    vk::Recorder rec(ctx());
    ops::gatherBackward(rec, u32(d_ids, {b, t}), d_dout.view(), dtable.view(),
                        u32(scratch, {ops::gatherBackwardScratch(vocab, n)}), u32(status, {2}),
                        write, variant);
    rec.submit();
    // Up to n fp32 additions per row (n/V on average): 1e-5 of the largest sum covers
    // rows of a few hundred terms at unit scale.
    EXPECT_TRUE(allClose(download(ctx(), dtable), want, 1e-5));
    EXPECT_EQ(readWords(status, 2), (std::vector<uint32_t>{0, 0}));
  }
}

// A vocabulary of 200,003 on the one-workgroup sort: 8 lanes looped ~75,000 times zeroing and
// scanning the counts, past the 65535 at which llvmpipe silently ends an invocation, and most
// rows summed another's positions; and 70,001 positions over a small vocabulary. Sums of up
// to ~700 terms: 1e-4 of the largest.
TEST_F(GatherTest, BackwardOverALargeVocabularyStaysWithinACpuLanesLoopBudget) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto [vocab, dim, n] : {std::tuple<int64_t, int64_t, int64_t>{200003, 3, 1000},
                               std::tuple<int64_t, int64_t, int64_t>{101, 3, 70001}}) {
    SCOPED_TRACE(testing::Message() << "V=" << vocab << " n=" << n);
    const auto ids = randomIds(rng, n, vocab);
    const auto dout = rng.uniform(n * dim);
    std::vector<float> want(vocab * dim);
    auto dtable = poisoned(ctx(), {vocab, dim});
    ops::ref::gatherBackward(ids.data(), dout.data(), want.data(), n, vocab, dim, false);
    auto d_ids = words(ids), status = zeroStatus();
    auto scratch = words(std::vector<uint32_t>(ops::gatherBackwardScratch(vocab, n), 0xDEADBEEF));
    auto d_dout = upload(ctx(), {n, dim}, dout);
    vk::Recorder rec(ctx());
    ops::gatherBackward(rec, u32(d_ids, {n}), d_dout.view(), dtable.view(),
                        u32(scratch, {ops::gatherBackwardScratch(vocab, n)}), u32(status, {2}),
                        ops::Write::Overwrite, ops::GatherBackwardVariant::Bucket);
    rec.submit();
    EXPECT_TRUE(allClose(download(ctx(), dtable), want, 1e-4));
  }
}

std::string backwardCaseName(const ::testing::TestParamInfo<GatherBackwardTest::ParamType>& info) {
  const auto [variant, write] = info.param;
  const char* names[] = {"Auto", "Bucket", "Scan"};
  return std::string(names[int(variant)]) +
         (write == ops::Write::Accumulate ? "Accumulate" : "Overwrite");
}

INSTANTIATE_TEST_SUITE_P(Variants, GatherBackwardTest,
                         ::testing::Combine(::testing::Values(ops::GatherBackwardVariant::Auto,
                                                              ops::GatherBackwardVariant::Bucket,
                                                              ops::GatherBackwardVariant::Scan),
                                            ::testing::Values(ops::Write::Overwrite,
                                                              ops::Write::Accumulate)),
                         backwardCaseName);

TEST_F(GatherTest, BackwardIsDeterministicAndTheVariantsAgreeBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  // A skewed id distribution: one very frequent id (like padding) and a tail. D = 64 takes
  // the vec4 path of the bucketed sum, D = 19 the scalar one.
  for (int64_t dim : {19, 64}) {
    SCOPED_TRACE(testing::Message() << "D=" << dim);
    const int64_t n = 2053, vocab = 97;
    std::vector<uint32_t> ids = randomIds(rng, n, vocab);
    for (int64_t i = 0; i < n; i += 2) ids[i] = 7;
    const auto dout = rng.uniform(n * dim, -10.0f, 10.0f);
    auto d_ids = words(ids), status = zeroStatus();
    auto d_dout = upload(ctx(), {n, dim}, dout);
    auto scratch = words(std::vector<uint32_t>(ops::gatherBackwardScratch(vocab, n)));
    std::vector<std::vector<float>> results;
    for (auto variant : {ops::GatherBackwardVariant::Bucket, ops::GatherBackwardVariant::Bucket,
                         ops::GatherBackwardVariant::Scan}) {
      auto dtable = poisoned(ctx(), {vocab, dim});
      vk::Recorder rec(ctx());
      ops::gatherBackward(rec, u32(d_ids, {n}), d_dout.view(), dtable.view(),
                          u32(scratch, {vocab + n}), u32(status, {2}), ops::Write::Overwrite,
                          variant);
      rec.submit();
      results.push_back(download(ctx(), dtable));
    }
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[1].data(), vocab * dim * 4));
    EXPECT_EQ(0, std::memcmp(results[0].data(), results[2].data(), vocab * dim * 4));
  }
}

// Bad ids give a zero row and the flag, never a read past the table; at dim 5 the forward
// runs a float at a time, at dim 8 four at a time.
TEST_F(GatherTest, OutOfRangeIdsAreFlaggedAndNeverRead) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const int64_t dim : {5, 8}) {
    SCOPED_TRACE(testing::Message() << "D=" << dim);
    const int64_t n = 37, vocab = 11;
    std::vector<uint32_t> ids = randomIds(rng, n, vocab);
    ids[3] = vocab;         // just past the end
    ids[20] = 0xFFFFFFFFu;  // the largest u32
    ids[36] = vocab + 1000;
    const auto table = rng.uniform(vocab * dim), dout = rng.uniform(n * dim);
    auto d_ids = words(ids);
    auto d_table = upload(ctx(), {vocab, dim}, table), d_dout = upload(ctx(), {n, dim}, dout);
    auto out = poisoned(ctx(), {n, dim});
    for (auto variant : {ops::GatherBackwardVariant::Bucket, ops::GatherBackwardVariant::Scan}) {
      auto forward_status = zeroStatus(), backward_status = zeroStatus();
      auto dtable = poisoned(ctx(), {vocab, dim});
      auto scratch = words(std::vector<uint32_t>(vocab + n));
      vk::Recorder rec(ctx());
      ops::gather(rec, u32(d_ids, {n}), d_table.view(), out.view(), u32(forward_status, {2}));
      ops::gatherBackward(rec, u32(d_ids, {n}), d_dout.view(), dtable.view(),
                          u32(scratch, {vocab + n}), u32(backward_status, {2}),
                          ops::Write::Overwrite, variant);
      rec.submit();
      const std::vector<uint32_t> flagged = {ops::kGatherBadId, 0xFFFFFFFFu};
      EXPECT_EQ(readWords(forward_status, 2), flagged);
      EXPECT_EQ(readWords(backward_status, 2), flagged);
      std::vector<float> want(n * dim), want_grad(vocab * dim);
      ops::ref::gather(ids.data(), table.data(), want.data(), n, vocab, dim);
      ops::ref::gatherBackward(ids.data(), dout.data(), want_grad.data(), n, vocab, dim, false);
      EXPECT_TRUE(allClose(download(ctx(), out), want, 0.0));  // bad rows are 0
      EXPECT_TRUE(allClose(download(ctx(), dtable), want_grad, 1e-6));
    }
    // Flags accumulate; a later good batch does not clear them.
    auto status = words(std::vector<uint32_t>{ops::kGatherBadId, 12});
    auto good = words(randomIds(rng, n, vocab));
    vk::Recorder rec(ctx());
    ops::gather(rec, u32(good, {n}), d_table.view(), out.view(), u32(status, {2}));
    rec.submit();
    EXPECT_EQ(readWords(status, 2), (std::vector<uint32_t>{ops::kGatherBadId, 12}));
  }
}

// Every view at an offset of 1 to 4 words into a larger buffer (a slice of a batch or a
// dataset): forward and both backward variants still match, and the margins stay untouched.
TEST_F(GatherTest, ViewsAtAnyWordOffsetWork) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 37, vocab = 11, dim = 8;
  for (int64_t at : {1, 2, 3, 4}) {
    SCOPED_TRACE(testing::Message() << "offset " << at << " words");
    auto ids = randomIds(rng, n, vocab);
    const auto table = rng.uniform(vocab * dim), dout = rng.uniform(n * dim);
    std::vector<float> want(n * dim), want_grad(vocab * dim);
    ops::ref::gather(ids.data(), table.data(), want.data(), n, vocab, dim);
    ops::ref::gatherBackward(ids.data(), dout.data(), want_grad.data(), n, vocab, dim, false);
    // u32 views at `at`: ids, status and scratch share one buffer, each with a gap after it.
    const int64_t scratch_n = ops::gatherBackwardScratch(vocab, n);
    std::vector<uint32_t> all(at + n + 3 + 2 + 3 + scratch_n + 3, 0xDEADBEEF);
    std::copy(ids.begin(), ids.end(), all.begin() + at);
    const int64_t status_at = at + n + 3, scratch_at = status_at + 2 + 3;
    all[status_at] = all[status_at + 1] = 0;
    const vk::Buffer u = words(all);
    auto tab = placed(ctx(), {vocab, dim}, table, at + 1),
         out = placed(ctx(), {n, dim}, {}, at + 2);
    auto dy = placed(ctx(), {n, dim}, dout, at);
    for (auto variant : {ops::GatherBackwardVariant::Bucket, ops::GatherBackwardVariant::Scan}) {
      auto grad = placed(ctx(), {vocab, dim}, {}, at + 3);
      vk::Recorder rec(ctx());
      const auto v_ids = ops::view(u, {n}, uint64_t(at) * 4, ops::DType::U32);
      const auto v_status = ops::view(u, {2}, uint64_t(status_at) * 4, ops::DType::U32);
      ops::gather(rec, v_ids, tab.view, out.view, v_status);
      ops::gatherBackward(rec, v_ids, dy.view, grad.view,
                          ops::view(u, {scratch_n}, uint64_t(scratch_at) * 4, ops::DType::U32),
                          v_status, ops::Write::Overwrite, variant);
      rec.submit();
      EXPECT_TRUE(allClose(readPlaced(ctx(), out), want, 0.0));
      EXPECT_TRUE(allClose(readPlaced(ctx(), grad), want_grad, 1e-6));
      const auto words_after = readWords(u, all.size());
      for (int64_t i = 0; i < int64_t(all.size()); ++i) {
        const bool inside = (i >= at && i < at + n) || (i >= status_at && i < status_at + 2) ||
                            (i >= scratch_at && i < scratch_at + scratch_n);
        if (!inside) {
          EXPECT_EQ(words_after[i], 0xDEADBEEFu) << "word " << i;
        }
      }
      EXPECT_EQ(words_after[status_at], 0u) << "no bad id was flagged";
    }
  }
}

// A view of n elements of `dtype` one element into a fresh buffer (at = 1: 2 bytes for a
// 16-bit tensor), or at its start: filled with data, or poisoned.
struct Shifted {
  DeviceTensor tensor;
  ops::Shape shape;
  int64_t at;
  ops::TensorView view() const {
    return ops::view(tensor.buffer, shape, uint64_t(at) * ops::dtypeBytes(tensor.dtype),
                     tensor.dtype);
  }
};
Shifted shifted(vk::Context& context, ops::Shape shape, const std::vector<float>& data,
                ops::DType dtype, int64_t at) {
  std::vector<float> padded(size_t(at), 0.0f);
  padded.insert(padded.end(), data.begin(), data.end());
  return {data.empty() ? poisoned(context, {shape.numel() + at}, dtype)
                       : upload(context, {shape.numel() + at}, padded, dtype),
          shape, at};
}

// Tables, rows and gradients in 16 bits, or some. A gather moves values: a row in the same
// format or a wider one is exact, a narrower one is the table's value rounded once. The
// backward sums f32 values of the rounded dout (the f32 test's 1e-5) and rounds its store once
// (closeInFormat); Bucket and Scan add in the same order, so they agree bit for bit. Views
// start one element into their buffers on every other case (a 2-byte offset in 16 bits); the
// others start on 16 bytes, where D = 64 would take the f32-only vec4 kernels.
TEST_F(GatherTest, SixteenBitTensorsMatchCpu) {
  using ops::DType;
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Formats {
    DType table, rows;  // forward: table and out; backward: dtable and dout
  };
  for (const Formats f : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                          Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32},
                          Formats{DType::F32, DType::F16}})
    for (size_t which = 0; which < std::size(kCases); ++which) {
      const auto [b, t, vocab, dim] = kCases[which];
      const int64_t n = b * t, at = int64_t(which % 2);
      SCOPED_TRACE(testing::Message() << "B=" << b << " T=" << t << " V=" << vocab << " D=" << dim
                                      << " table " << ops::dtypeName(f.table) << ", rows "
                                      << ops::dtypeName(f.rows) << ", offset " << at);
      const auto ids = randomIds(rng, n, vocab);
      const auto table = ops::ref::roundTo(f.table, rng.uniform(vocab * dim));
      const auto dout = ops::ref::roundTo(f.rows, rng.uniform(n * dim));
      const auto init = ops::ref::roundTo(f.table, rng.uniform(vocab * dim));
      std::vector<float> want(n * dim), want_grad(vocab * dim), want_acc = init;
      ops::ref::gather(ids.data(), table.data(), want.data(), n, vocab, dim);
      want = ops::ref::roundTo(f.rows, want);
      ops::ref::gatherBackward(ids.data(), dout.data(), want_grad.data(), n, vocab, dim, false);
      ops::ref::gatherBackward(ids.data(), dout.data(), want_acc.data(), n, vocab, dim, true);

      auto d_ids = words(ids), status = zeroStatus();
      auto scratch = words(std::vector<uint32_t>(ops::gatherBackwardScratch(vocab, n)));
      const auto v_ids = u32(d_ids, {b, t}), v_status = u32(status, {2}),
                 v_scratch = u32(scratch, {ops::gatherBackwardScratch(vocab, n)});
      auto d_table = shifted(ctx(), {vocab, dim}, table, f.table, at);
      auto out = shifted(ctx(), {b, t, dim}, {}, f.rows, at);
      auto d_dout = shifted(ctx(), {b, t, dim}, dout, f.rows, at);
      vk::Recorder rec(ctx());
      ops::gather(rec, v_ids, d_table.view(), out.view(), v_status);
      std::vector<Shifted> grads;
      for (auto variant : {ops::GatherBackwardVariant::Bucket, ops::GatherBackwardVariant::Scan}) {
        grads.push_back(shifted(ctx(), {vocab, dim}, {}, f.table, at));
        ops::gatherBackward(rec, v_ids, d_dout.view(), grads.back().view(), v_scratch, v_status,
                            ops::Write::Overwrite, variant);
        grads.push_back(shifted(ctx(), {vocab, dim}, init, f.table, at));
        ops::gatherBackward(rec, v_ids, d_dout.view(), grads.back().view(), v_scratch, v_status,
                            ops::Write::Accumulate, variant);
      }
      rec.submit();
      EXPECT_EQ(download(ctx(), out.view()), want);  // a gather: exact, or one rounding
      std::vector<std::vector<float>> got;
      for (const Shifted& g : grads) got.push_back(download(ctx(), g.view()));
      EXPECT_TRUE(closeInFormat(got[0], want_grad, f.table, 1e-5)) << "bucket";
      EXPECT_TRUE(closeInFormat(got[1], want_acc, f.table, 1e-5)) << "bucket, accumulated";
      EXPECT_EQ(got[2], got[0]) << "scan and bucket differ";
      EXPECT_EQ(got[3], got[1]) << "scan and bucket differ, accumulating";
      EXPECT_EQ(readWords(status, 2), (std::vector<uint32_t>{0, 0}));
    }
}

// A u32 table (labels) is gathered as words, bits unchanged, into u32 or f32 rows; its rows
// cannot be 16-bit.
TEST_F(GatherTest, GathersU32TablesAsWords) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 29, vocab = 13, dim = 3;
  const auto ids = randomIds(rng, n, vocab);
  std::vector<uint32_t> table(vocab * dim), want(n * dim);
  for (uint32_t& x : table) x = rng.below(0xFFFFFFFFu);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t d = 0; d < dim; ++d) want[r * dim + d] = table[ids[r] * dim + d];
  auto d_ids = words(ids), d_table = words(table), status = zeroStatus();
  auto out = words(std::vector<uint32_t>(n * dim, 0xDEADBEEF));
  auto half = poisoned(ctx(), {n, dim}, ops::DType::F16);
  vk::Recorder rec(ctx());
  ops::gather(rec, u32(d_ids, {n}), u32(d_table, {vocab, dim}), u32(out, {n, dim}),
              u32(status, {2}));
  EXPECT_THROW(
      ops::gather(rec, u32(d_ids, {n}), u32(d_table, {vocab, dim}), half.view(), u32(status, {2})),
      ShapeError);
  rec.submit();
  EXPECT_EQ(readWords(out, n * dim), want);
}

TEST_F(GatherTest, CheckIdsNamesTheFirstBadIdAndItsPosition) {
  const std::vector<uint32_t> ids = {0, 4, 64, 65, 3, 99};
  EXPECT_NO_THROW(ops::checkIds(std::span(ids).first(3), 65));
  try {
    ops::checkIds(ids, 65);
    FAIL() << "no ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_STREQ(e.what(), "gather: id 65 at position 3 is out of range for vocab 65");
  }
}

TEST_F(GatherTest, GradientMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t b = 3, t = 7, vocab = 6, dim = 5, n = b * t;
  const auto ids = randomIds(rng, n, vocab);
  std::vector<float> table = rng.uniform(vocab * dim);
  const std::vector<float> w = rng.uniform(n * dim);
  auto d_ids = words(ids), status = zeroStatus(), scratch = words(std::vector<uint32_t>(vocab + n));
  auto d_table = upload(ctx(), {vocab, dim}, table), d_w = upload(ctx(), {b, t, dim}, w);
  auto out = poisoned(ctx(), {b, t, dim}), dtable = poisoned(ctx(), {vocab, dim});
  vk::Recorder backward(ctx());
  ops::gatherBackward(backward, u32(d_ids, {b, t}), d_w.view(), dtable.view(),
                      u32(scratch, {vocab + n}), u32(status, {2}));
  backward.submit();
  const auto analytic = download(ctx(), dtable);
  vk::Recorder forward(ctx());
  ops::gather(forward, u32(d_ids, {b, t}), d_table.view(), out.view(), u32(status, {2}));
  auto loss = [&] {
    ctx().staging().upload(d_table.buffer, 0, table.data(), table.size() * 4);
    forward.submit();
    return weightedSum(download(ctx(), out), w);
  };
  EXPECT_TRUE(checkGradients(loss, {{"table", &table, analytic}}, rng));
}

// A strided table: rows overlap (stride < D, the windows of a token stream), abut (stride
// = D) or leave gaps (stride > D). Every case matches the CPU gather bit for bit, and an id
// past the last row is flagged without reading beyond the stream.
TEST_F(GatherTest, StridedTableGathersOverlappingRows) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t length = 1001;  // the stream: odd, and no multiple of any stride below
  for (auto [dim, stride] :
       std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {7, 1}, {64, 1}, {33, 5}, {6, 6}, {4, 9}}) {
    SCOPED_TRACE(testing::Message() << "D=" << dim << " stride " << stride);
    const int64_t vocab = (length - dim) / stride + 1, n = 3 * 37;
    std::vector<uint32_t> ids = randomIds(rng, n, vocab);
    ids[0] = uint32_t(vocab - 1);  // the last row ends at most at the stream's end
    ids[5] = uint32_t(vocab);      // one past it
    const auto stream = rng.uniform(length);
    std::vector<float> want(n * dim);
    ops::ref::gather(ids.data(), stream.data(), want.data(), n, vocab, dim, stride);
    auto d_ids = words(ids), status = zeroStatus();
    // The stream sits 3 words into its buffer and fills the rest exactly.
    std::vector<float> padded(3, 0.0f);
    padded.insert(padded.end(), stream.begin(), stream.end());
    auto d_stream = upload(ctx(), {int64_t(padded.size())}, padded);
    const ops::TensorView table{&d_stream.buffer, 12, {vocab, dim}, ops::DType::F32};
    auto out = poisoned(ctx(), {3, 37, dim});
    vk::Recorder rec(ctx());
    ops::gather(rec, u32(d_ids, {3, 37}), table, out.view(), u32(status, {2}), stride);
    rec.submit();
    const auto got = download(ctx(), out);
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * 4));
    EXPECT_EQ(readWords(status, 2), (std::vector<uint32_t>{ops::kGatherBadId, uint32_t(vocab)}));
  }
  // A stride whose last row would run past the buffer is a shape error, before recording.
  auto d_stream = upload(ctx(), {100}, rng.uniform(100));
  auto d_ids = words(std::vector<uint32_t>{0, 1}), status = zeroStatus();
  auto out = poisoned(ctx(), {2, 10});
  vk::Recorder rec(ctx());
  EXPECT_NO_THROW(ops::gather(rec, u32(d_ids, {2}), ops::view(d_stream.buffer, {91, 10}),
                              out.view(), u32(status, {2}), 1));
  try {
    ops::gather(rec, u32(d_ids, {2}), ops::view(d_stream.buffer, {92, 10}), out.view(),
                u32(status, {2}), 1);
    ADD_FAILURE() << "no ShapeError for a table one row too long";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 404 bytes, its buffer has 400"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ops::gather(rec, u32(d_ids, {2}), ops::view(d_stream.buffer, {91, 10}), out.view(),
                           u32(status, {2}), -1),
               ShapeError);
  EXPECT_EQ(rec.dispatchCount(), 1u);  // only the good call recorded
}

TEST_F(GatherTest, RejectsBadShapesBeforeRecording) {
  Rng rng;
  auto ids = words(randomIds(rng, 32, 10)), status = zeroStatus(),
       scratch = words(std::vector<uint32_t>(41));
  auto table = upload(ctx(), {10, 3}, rng.uniform(30)), out = poisoned(ctx(), {4, 8, 3});
  auto wrong = poisoned(ctx(), {4, 8, 4});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec,
      [&] {
        ops::gather(rec, ops::view(ids, {4, 8}), table.view(), out.view(), u32(status, {2}));
      },
      "gather: table (10,3), ids (4,8): ids must be u32");
  expectShapeError(
      rec,
      [&] {
        ops::gather(rec, u32(ids, {4, 8}), table.view(), wrong.view(), u32(status, {2}));
      },
      "out must have the shape of ids plus D = 3");
  expectShapeError(
      rec,
      [&] {
        ops::gather(rec, u32(ids, {4, 8}), ops::view(table.buffer, {30}), out.view(),
                    u32(status, {2}));
      },
      "table must be a non-empty (V,D)");
  expectShapeError(
      rec,
      [&] {
        ops::gather(rec, u32(ids, {4, 8}), table.view(), out.view(), u32(status, {1}));
      },
      "status (1) must hold 2 u32 words");
  expectShapeError(
      rec,
      [&] {
        ops::gather(rec, u32(ids, {4, 9}), table.view(), poisoned(ctx(), {4, 9, 3}).view(),
                    u32(status, {2}));
      },
      "ids (4,9) at offset 0 needs 144 bytes");
  expectShapeError(
      rec,
      [&] {
        ops::gatherBackward(rec, u32(ids, {4, 8}), out.view(), table.view(), u32(scratch, {41}),
                            u32(status, {2}));
      },
      "scratch (41) holds fewer than V + n = 42");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
