#include "vkgrad/ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/cross_entropy.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

// loss = (max - logit[t]) + log(sum exp(logits - max)) in fp32 against double: a few ulp of
// the row's loss plus the per-lane Kahan sum; normalised by the largest loss.
constexpr double kLossTolerance = 1e-5;
// dlogits = (p - onehot) * g: exp of an exact difference, a few ulp of each p.
constexpr double kGradTolerance = 1e-5;
constexpr float kInf = std::numeric_limits<float>::infinity();
// Rows the tests mark as ignored use this target.
constexpr uint32_t kIgnore = 4000000000u;

using ops::SoftmaxVariant;
using ops::Write;

// Every tensor of one call, each `pad` elements into its own buffer whose pads are NaN
// (f32) or 0xFFFFFFFF (u32), so views at any 4-byte offset are exercised and stray writes
// show.
struct Problem {
  int64_t rows, classes, pad;
  std::vector<float> logits;
  std::vector<uint32_t> targets;
  uint32_t ignore_index = kIgnore;
};

vk::Buffer words(vk::Context& context, const std::vector<uint32_t>& data, int64_t pad) {
  std::vector<uint32_t> all(data.size() + 2 * pad, 0xFFFFFFFFu);
  std::copy(data.begin(), data.end(), all.begin() + pad);
  return uploadWords(context, all);
}

// The device side of a Problem, and views into it.
struct DeviceProblem {
  DeviceProblem(vk::Context& context, const Problem& p)
      : pb(p),
        logits(paddedUpload(context, p.logits, p.pad)),
        targets(words(context, p.targets, p.pad)),
        loss_rows(paddedUpload(context, std::vector<float>(p.rows, std::nanf("")), p.pad)),
        loss_mean(paddedUpload(context, {std::nanf("")}, p.pad)),
        saved(paddedUpload(
            context, std::vector<float>(ops::crossEntropySavedSize(p.rows), std::nanf("")), p.pad)),
        status(words(context, {0, 0}, p.pad)) {}
  ops::TensorView at(const DeviceTensor& t, ops::Shape shape) const {
    return ops::view(t.buffer, shape, pb.pad * 4);
  }
  ops::TensorView logitsView() const { return at(logits, {pb.rows, pb.classes}); }
  ops::TensorView targetsView() const {
    return ops::view(targets, {pb.rows}, pb.pad * 4, ops::DType::U32);
  }
  ops::TensorView savedView() const { return at(saved, {ops::crossEntropySavedSize(pb.rows)}); }
  void forward(vk::Recorder& rec, SoftmaxVariant variant = SoftmaxVariant::Auto) const {
    ops::crossEntropy(
        rec, logitsView(), targetsView(), at(loss_rows, {pb.rows}), at(loss_mean, {1}), savedView(),
        ops::view(status, {2}, pb.pad * 4, ops::DType::U32), pb.ignore_index, variant);
  }
  void backward(vk::Recorder& rec, const DeviceTensor& dmean, const DeviceTensor& dlogits, Write w,
                SoftmaxVariant variant = SoftmaxVariant::Auto) const {
    ops::crossEntropyBackward(rec, logitsView(), targetsView(), savedView(), at(dmean, {1}),
                              at(dlogits, {pb.rows, pb.classes}), pb.ignore_index, w, variant);
  }
  std::vector<uint32_t> statusWords(vk::Context& context) const {
    const auto all = downloadWords(context, status, 2 + 2 * pb.pad);
    return {all.begin() + pb.pad, all.end() - pb.pad};
  }

  const Problem& pb;
  DeviceTensor logits;
  vk::Buffer targets;
  DeviceTensor loss_rows, loss_mean, saved;
  vk::Buffer status;
};

Problem randomProblem(Rng& rng, int64_t rows, int64_t classes, int64_t pad, float spread) {
  Problem p{rows, classes, pad, rng.normal(rows * classes, 0.0f, spread), {}};
  for (int64_t r = 0; r < rows; ++r)  // about a quarter of the rows ignored
    p.targets.push_back(rng.below(4) == 0 ? kIgnore : rng.below(uint32_t(classes)));
  return p;
}

// Runs forward, checks it against the CPU, then backward in both write modes.
void checkAgainstCpu(vk::Context& context, const Problem& p, SoftmaxVariant variant, Rng& rng,
                     const std::vector<uint32_t>& want_status = {0, 0}) {
  std::vector<float> want_rows(p.rows);
  int64_t count = 0;
  const double want_mean =
      ops::ref::crossEntropy(p.logits.data(), p.targets.data(), want_rows.data(), p.rows, p.classes,
                             p.ignore_index, &count);
  DeviceProblem d(context, p);
  vk::Recorder rec(context);
  d.forward(rec, variant);
  rec.submit();
  const auto rows = download(context, d.loss_rows), mean = download(context, d.loss_mean);
  EXPECT_TRUE(allClose(unpadded(rows, p.pad), want_rows, kLossTolerance));
  EXPECT_TRUE(padsUntouched(rows, p.pad));
  EXPECT_TRUE(
      allClose(unpadded(mean, p.pad), std::vector<float>{float(want_mean)}, kLossTolerance));
  EXPECT_TRUE(padsUntouched(mean, p.pad));
  const auto saved = download(context, d.saved);
  EXPECT_EQ(saved[p.pad + 2 * p.rows], float(count));
  EXPECT_TRUE(padsUntouched(saved, p.pad));
  EXPECT_EQ(d.statusWords(context), want_status);

  const float g = rng.uniform(1, 0.5f, 2.0f)[0];
  auto dmean = paddedUpload(context, {g}, p.pad);
  std::vector<float> want(p.logits.size());
  ops::ref::crossEntropyBackward(p.logits.data(), p.targets.data(), g, want.data(), p.rows,
                                 p.classes, p.ignore_index);
  for (Write w : {Write::Overwrite, Write::Accumulate}) {
    SCOPED_TRACE(w == Write::Accumulate ? "accumulate" : "overwrite");
    const auto old = rng.normal(p.logits.size());
    auto dlogits = w == Write::Accumulate
                       ? paddedUpload(context, old, p.pad)
                       : poisoned(context, {int64_t(p.logits.size()) + 2 * p.pad});
    vk::Recorder brec(context);
    d.backward(brec, dmean, dlogits, w, variant);
    brec.submit();
    auto expect = want;
    if (w == Write::Accumulate)
      for (size_t i = 0; i < expect.size(); ++i) expect[i] += old[i];
    const auto got = download(context, dlogits);
    EXPECT_TRUE(allClose(unpadded(got, p.pad), expect, kGradTolerance));
    EXPECT_TRUE(padsUntouched(got, p.pad));
  }
}

class CrossEntropyTest : public VkTest, public ::testing::WithParamInterface<SoftmaxVariant> {};

TEST_P(CrossEntropyTest, MatchesCpuOnOddShapes) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1},    {3, 7},      {17, 129}, {3, 1000},
                                                {1, 1031}, {2, 100003}, {40, 65}};
  int64_t pad = 0;
  for (auto [rows, classes] : shapes) {
    SCOPED_TRACE(testing::Message() << "(" << rows << "," << classes << ") at element " << pad);
    checkAgainstCpu(ctx(), randomProblem(rng, rows, classes, pad, 3.0f), GetParam(), rng);
    pad = (pad + 1) % 4;
  }
}

// A language model's head: 128 rows of a 32,767-id vocabulary. On a CPU device a few
// workgroups grid-stride over the rows, and llvmpipe ends an invocation after 65535 loop
// iterations: 16 rows of 32,767 logits on a workgroup of 8 lanes once came back as NaN
// gradients (ops::rowGroups now keeps each lane within its budget).
TEST_F(VkTest, CrossEntropyOverALanguageModelsVocabularyMatchesCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  checkAgainstCpu(ctx(), randomProblem(rng, 128, 32767, 1, 2.0f), SoftmaxVariant::Auto, rng);
}

TEST_P(CrossEntropyTest, IsStableForLargeLogits) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{17, 7}, {5, 1000}}) {
    SCOPED_TRACE(testing::Message() << "(" << rows << "," << classes << ")");
    Problem p = randomProblem(rng, rows, classes, 1, 1.0f);
    p.logits = rng.uniform(rows * classes, -1e4f, 1e4f);
    // Row 0: the target is the max by far, so its loss is ~0 and its gradient ~0; exp(1e4)
    // would overflow without the max subtracted.
    p.targets[0] = 2 % uint32_t(classes);
    p.logits[p.targets[0]] = 2e4f;
    checkAgainstCpu(ctx(), p, GetParam(), rng);
  }
}

TEST_P(CrossEntropyTest, MasksInfiniteLogits) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (const auto& shape : {std::pair<int64_t, int64_t>{6, 9}, {6, 700}}) {
    const int64_t rows = shape.first, classes = shape.second;  // captured below
    SCOPED_TRACE(testing::Message() << "(" << rows << "," << classes << ")");
    Problem p = randomProblem(rng, rows, classes, 0, 2.0f);
    for (float& v : p.logits)
      if (rng.below(3) == 0) v = -kInf;
    auto row = [&](int64_t r) { return p.logits.begin() + r * classes; };
    std::fill(row(0), row(1), -kInf);  // all -inf, ignored: loss 0, no NaN anywhere
    p.targets[0] = kIgnore;
    for (int64_t r = 1; r < rows; ++r) {  // valid targets on finite logits, except row 2
      p.targets[r] = rng.below(uint32_t(classes));
      row(r)[p.targets[r]] = 1.0f;
    }
    row(2)[p.targets[2]] = -kInf;  // a masked target: loss +inf, finite gradient
    checkAgainstCpu(ctx(), p, GetParam(), rng);
    // An all -inf row with a valid target: loss +inf, zero probabilities.
    std::fill(row(1), row(2), -kInf);
    checkAgainstCpu(ctx(), p, GetParam(), rng);
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, CrossEntropyTest,
                         ::testing::Values(SoftmaxVariant::Auto, SoftmaxVariant::WorkgroupStorage),
                         [](const auto& info) { return ops::softmaxVariantName(info.param); });

TEST_F(VkTest, CrossEntropyWithEveryRowIgnoredIsZero) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Problem p = randomProblem(rng, 5, 11, 0, 1.0f);
  p.ignore_index = 3;  // an ordinary class id can be the ignored one
  p.targets.assign(5, 3);
  checkAgainstCpu(ctx(), p, SoftmaxVariant::Auto, rng);
  DeviceProblem d(ctx(), p);
  vk::Recorder rec(ctx());
  d.forward(rec);
  rec.submit();
  EXPECT_EQ(download(ctx(), d.loss_mean), std::vector<float>{0.0f});
  EXPECT_EQ(download(ctx(), d.loss_rows), std::vector<float>(5, 0.0f));
}

TEST_F(VkTest, CrossEntropyFlagsTargetsOutOfRange) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  Problem p = randomProblem(rng, 9, 13, 1, 1.0f);
  p.targets[2] = 13;           // one past the last class
  p.targets[5] = 1000000000u;  // far out: an unchecked read would leave the buffer
  // The reference ignores such rows too.
  checkAgainstCpu(ctx(), p, SoftmaxVariant::Auto, rng, {ops::kCrossEntropyBadTarget, 1000000000u});
}

TEST_F(VkTest, CrossEntropyIsDeterministicAndReplaysWithNewUpstreamGradient) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Problem p = randomProblem(rng, 33, 517, 0, 3.0f);
  DeviceProblem d(ctx(), p);
  auto dmean = upload(ctx(), {1}, std::vector<float>{1.0f});
  auto dlogits = poisoned(ctx(), {p.rows, p.classes});
  vk::Recorder rec(ctx());  // one recorded step, replayed
  d.forward(rec);
  d.backward(rec, dmean, dlogits, Write::Overwrite);
  rec.submit();
  const auto mean1 = download(ctx(), d.loss_mean), grad1 = download(ctx(), dlogits);
  const std::vector<float> two{2.0f};
  ctx().staging().upload(dmean.buffer, 0, two.data(), 4);
  rec.submit();
  const auto mean2 = download(ctx(), d.loss_mean), grad2 = download(ctx(), dlogits);
  EXPECT_EQ(0, std::memcmp(mean1.data(), mean2.data(), 4));
  for (size_t i = 0; i < grad1.size(); ++i) ASSERT_EQ(grad2[i], 2.0f * grad1[i]) << i;
}

// loss = w * mean with the GPU forward; the analytic gradient is the GPU backward with
// dmean = w.
TEST_F(VkTest, CrossEntropyBackwardPassesGradCheck) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (auto [rows, classes] : {std::pair<int64_t, int64_t>{4, 7}, {3, 129}}) {
    SCOPED_TRACE(testing::Message() << "(" << rows << "," << classes << ")");
    Problem p = randomProblem(rng, rows, classes, 0, 2.0f);
    p.targets[1] = kIgnore;
    const float w = rng.uniform(1, 0.5f, 2.0f)[0];
    auto mean = [&] {
      DeviceProblem d(ctx(), p);
      vk::Recorder rec(ctx());
      d.forward(rec);
      rec.submit();
      return double(w) * download(ctx(), d.loss_mean)[0];
    };
    DeviceProblem d(ctx(), p);
    auto dmean = upload(ctx(), {1}, std::vector<float>{w});
    auto dlogits = poisoned(ctx(), {rows, classes});
    vk::Recorder rec(ctx());
    d.forward(rec);
    d.backward(rec, dmean, dlogits, Write::Overwrite);
    rec.submit();
    const auto grad = download(ctx(), dlogits);
    EXPECT_TRUE(checkGradients(mean, {{"logits", &p.logits, grad}}, rng));
  }
}

// One 16-bit case: the logits' and dlogits' formats, and the losses' (loss_rows, loss_mean,
// dmean) and saved's.
struct SixteenBitCase {
  ops::DType logits, dlogits, losses, saved;
};

// x padded with `pad` ones at each end, in `dtype`; the view of x starts `pad` elements in.
DeviceTensor paddedIn(vk::Context& context, const std::vector<float>& x, int64_t pad,
                      ops::DType dtype) {
  std::vector<float> all(x.size() + 2 * pad, 1.0f);
  std::copy(x.begin(), x.end(), all.begin() + pad);
  return upload(context, {int64_t(all.size())}, all, dtype);
}

// Per row the max logit and log(sum(exp(logits - max))), in double, then the count: saved's
// contents as the forward computes them (finite logits).
std::vector<float> referenceSaved(const std::vector<float>& logits, int64_t rows, int64_t c,
                                  int64_t count) {
  std::vector<float> saved;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits.data() + r * c;
    const double m = *std::max_element(row, row + c);
    double sum = 0.0;
    for (int64_t i = 0; i < c; ++i) sum += std::exp(row[i] - m);
    saved.push_back(float(m));
    saved.push_back(float(std::log(sum)));
  }
  saved.push_back(float(count));
  return saved;
}

// The backward from saved as stored (what the kernel reads): (exp((x - m) - l) - onehot) * g /
// count, in double.
std::vector<float> backwardFromSaved(const std::vector<float>& logits,
                                     const std::vector<uint32_t>& targets,
                                     const std::vector<float>& saved, float g, int64_t rows,
                                     int64_t c) {
  std::vector<float> d(logits.size(), 0.0f);
  const double count = saved[2 * rows];
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == kIgnore || count == 0) continue;
    for (int64_t i = 0; i < c; ++i) {
      const double p = std::exp((double(logits[r * c + i]) - saved[2 * r]) - saved[2 * r + 1]);
      d[r * c + i] = float((p - (uint32_t(i) == targets[r] ? 1.0 : 0.0)) * g / count);
    }
  }
  return d;
}

// Logits and dlogits in f16 or bf16 with f32 losses and saved (a training step's usual mix),
// also bf16 logits with an f32 gradient, and every float tensor 16-bit. Each 16-bit view sits
// an odd number of elements (2 bytes) into its buffer. The references run on the rounded
// logits; the mean is that of the losses as stored, and the backward's reference reads the
// saved statistics as stored, as a training step feeds them. The arithmetic is f32, so each
// output keeps the f32 test's tolerance plus the one rounding of its store (closeInFormat).
TEST_F(VkTest, CrossEntropySixteenBitTensorsMatchCpu) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  const SixteenBitCase cases[] = {{DType::F16, DType::F16, DType::F32, DType::F32},
                                  {DType::BF16, DType::BF16, DType::F32, DType::F32},
                                  {DType::BF16, DType::F32, DType::F32, DType::F32},
                                  {DType::F16, DType::F16, DType::F16, DType::F16},
                                  {DType::BF16, DType::BF16, DType::BF16, DType::BF16}};
  // At most 256 rows: a bf16 saved holds the count exactly up to there.
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1}, {3, 7}, {17, 129}, {3, 1000}, {40, 65}};
  const int64_t pad = 1;
  for (const SixteenBitCase& f : cases)
    for (const SoftmaxVariant variant : {SoftmaxVariant::Auto, SoftmaxVariant::WorkgroupStorage})
      for (const auto& shape : shapes) {
        const int64_t rows = shape.first, c = shape.second;  // captured below
        SCOPED_TRACE(testing::Message()
                     << "logits " << ops::dtypeName(f.logits) << ", dlogits "
                     << ops::dtypeName(f.dlogits) << ", losses " << ops::dtypeName(f.losses)
                     << ", saved " << ops::dtypeName(f.saved) << " "
                     << ops::softmaxVariantName(variant) << " (" << rows << "," << c << ")");
        Problem p = randomProblem(rng, rows, c, pad, 3.0f);
        p.logits = ops::ref::roundTo(f.logits, p.logits);
        std::vector<float> want_rows(rows);
        int64_t count = 0;
        ops::ref::crossEntropy(p.logits.data(), p.targets.data(), want_rows.data(), rows, c,
                               kIgnore, &count);
        const auto stored_rows = ops::ref::roundTo(f.losses, want_rows);
        double total = 0.0;
        for (float l : stored_rows) total += l;
        const float want_mean = count == 0 ? 0.0f : float(total / double(count));
        const int64_t saved_n = ops::crossEntropySavedSize(rows);
        const auto bytes = [&](DType t) { return pad * int64_t(ops::dtypeBytes(t)); };
        auto tlogits = paddedIn(ctx(), p.logits, pad, f.logits);
        vk::Buffer targets = words(ctx(), p.targets, 0);
        auto loss_rows = poisoned(ctx(), {rows}, f.losses),
             loss_mean = poisoned(ctx(), {1}, f.losses);
        auto saved = poisoned(ctx(), {saved_n + 2 * pad}, f.saved);
        vk::Buffer status = uploadWords(ctx(), std::vector<uint32_t>{0, 0});
        const auto logits_view = ops::view(tlogits.buffer, {rows, c}, bytes(f.logits), f.logits);
        const auto saved_view = ops::view(saved.buffer, {saved_n}, bytes(f.saved), f.saved);
        const auto targets_view = ops::view(targets, {rows}, 0, DType::U32);
        vk::Recorder rec(ctx());
        ops::crossEntropy(rec, logits_view, targets_view, loss_rows.view(), loss_mean.view(),
                          saved_view, ops::view(status, {2}, 0, DType::U32), kIgnore, variant);
        rec.submit();
        EXPECT_TRUE(closeInFormat(download(ctx(), loss_rows), want_rows, f.losses, kLossTolerance))
            << "loss_rows";
        EXPECT_TRUE(closeInFormat(download(ctx(), loss_mean), std::vector<float>{want_mean},
                                  f.losses, kLossTolerance))
            << "loss_mean";
        const auto saved_all = download(ctx(), saved);
        const auto got_saved = unpadded(saved_all, pad);
        EXPECT_TRUE(padsUntouched(saved_all, pad));
        EXPECT_TRUE(closeInFormat(got_saved, referenceSaved(p.logits, rows, c, count), f.saved,
                                  kLossTolerance))
            << "saved";

        const float g = ops::ref::roundTo(f.losses, rng.uniform(1, 0.5f, 2.0f)[0]);
        auto dmean = upload(ctx(), {1}, std::vector<float>{g}, f.losses);
        const auto want = backwardFromSaved(p.logits, p.targets, got_saved, g, rows, c);
        const auto old = ops::ref::roundTo(f.dlogits, rng.normal(rows * c));
        auto want_acc = want;
        for (size_t i = 0; i < want.size(); ++i) want_acc[i] += old[i];
        auto dlogits = poisoned(ctx(), {rows * c + 2 * pad}, f.dlogits);
        auto acc = paddedIn(ctx(), old, pad, f.dlogits);
        const auto at = [&](const DeviceTensor& t) {
          return ops::view(t.buffer, {rows, c}, bytes(f.dlogits), f.dlogits);
        };
        vk::Recorder brec(ctx());
        ops::crossEntropyBackward(brec, logits_view, targets_view, saved_view, dmean.view(),
                                  at(dlogits), kIgnore, Write::Overwrite, variant);
        ops::crossEntropyBackward(brec, logits_view, targets_view, saved_view, dmean.view(),
                                  at(acc), kIgnore, Write::Accumulate, variant);
        brec.submit();
        const auto got = download(ctx(), dlogits);
        EXPECT_TRUE(closeInFormat(unpadded(got, pad), want, f.dlogits, kGradTolerance))
            << "dlogits";
        EXPECT_TRUE(padsUntouched(got, pad));
        EXPECT_TRUE(
            closeInFormat(unpadded(download(ctx(), acc), pad), want_acc, f.dlogits, kGradTolerance))
            << "dlogits accumulated";
      }
}

// dlogits in place of the logits needs their format.
TEST_F(VkTest, CrossEntropyBackwardInPlaceNeedsTheLogitsFormat) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const Problem p = randomProblem(rng, 4, 9, 0, 1.0f);
  DeviceProblem d(ctx(), p);
  auto dmean = upload(ctx(), {1}, std::vector<float>{1.0f});
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::crossEntropyBackward(rec, d.logitsView(), d.targetsView(), d.savedView(), dmean.view(),
                                  ops::view(d.logits.buffer, {4, 9}, 0, ops::DType::BF16));
      },
      "crossEntropyBackward: dlogits (bf16) in place of logits (f32) needs its dtype");
}

TEST_F(VkTest, CrossEntropyRejectsBadShapesBeforeRecording) {
  Rng rng;
  auto logits = upload(ctx(), {4, 7}, rng.uniform(28));
  auto f32 = poisoned(ctx(), {64});
  vk::Buffer u32 = ctx().allocator().allocate(64 * 4);
  const auto U = [&](ops::Shape s, uint64_t offset = 0) {
    return ops::view(u32, s, offset, ops::DType::U32);
  };
  const auto F = [&](ops::Shape s, uint64_t offset) { return ops::view(f32.buffer, s, offset); };
  const auto fwd = [&](ops::TensorView l, ops::TensorView t, ops::TensorView rows,
                       ops::TensorView saved) {
    return [=](vk::Recorder& rec) {
      ops::crossEntropy(rec, l, t, rows, F({1}, 0), saved, U({2}, 128));
    };
  };
  const auto rows4 = F({4}, 4), saved4 = F({9}, 32);
  expectShapeError(ctx(), fwd(logits.view(), U({5}), rows4, saved4),
                   "crossEntropy: logits (4,7), targets (5): targets must have the shape of "
                   "logits without C");
  expectShapeError(ctx(), fwd(logits.view(), F({4}, 160), rows4, saved4),
                   "targets must be u32, got f32");
  expectShapeError(ctx(), fwd(logits.view(), U({4}), F({4, 1}, 4), saved4),
                   "loss_rows must be shaped like targets");
  expectShapeError(ctx(), fwd(logits.view(), U({4}), rows4, F({8}, 32)),
                   "saved must hold 2 * rows + 1 = 9 floats");
  expectShapeError(ctx(), fwd(ops::view(logits.buffer, {4, 0}), U({4}), rows4, saved4),
                   "logits must be a non-empty (..., C)");
  expectShapeError(ctx(), fwd(logits.view(), U({4}), F({4}, 0), saved4),
                   "crossEntropy: loss_rows (4) overlaps loss_mean (1)");
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::crossEntropy(rec, logits.view(), U({4}), rows4, F({1}, 0), saved4, U({1}, 128));
      },
      "crossEntropy: status (1) must hold 2 u32 words");
  const auto bwd = [&](ops::TensorView dmean, ops::TensorView dlogits) {
    return [=, l = logits.view(), t = U({4})](vk::Recorder& rec) {
      ops::crossEntropyBackward(rec, l, t, saved4, dmean, dlogits);
    };
  };
  expectShapeError(ctx(), bwd(F({1}, 0), F({4, 8}, 64)),
                   "crossEntropyBackward: logits (4,7), targets (4), dlogits (4,8): dlogits "
                   "must be shaped like logits");
  expectShapeError(ctx(), bwd(F({2}, 0), F({4, 7}, 64)), "dmean must hold one float");
  expectShapeError(ctx(), bwd(F({1}, 0), F({4, 7}, 28)),
                   "crossEntropyBackward: dlogits (4,7) overlaps saved (9)");
}

}  // namespace
}  // namespace vkgrad::test
