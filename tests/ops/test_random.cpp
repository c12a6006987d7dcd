#include "vkgrad/ops/random.h"

#include <cmath>
#include <cstring>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/gradcheck.h"
#include "common/random.h"
#include "common/shifted_view.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/ops/reference/random.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

class RandomTest : public VkTest {
 protected:
  static vk::Buffer words(std::span<const uint32_t> data) { return uploadWords(ctx(), data); }
  static std::vector<uint32_t> readWords(const vk::Buffer& b, size_t n) {
    return downloadWords(ctx(), b, n);
  }
  static vk::Buffer stateBuffer(const ops::RngState& s) {
    const uint32_t w[4] = {s.seed_lo, s.seed_hi, s.offset_lo, s.offset_hi};
    return words(w);
  }
  // A poisoned u32 tensor: 0xFFFFFFFF is a possible Philox word, so tests compare against a
  // reference rather than look for the poison.
  static vk::Buffer poisonedWords(size_t n) { return words(std::vector<uint32_t>(n, 0xFFFFFFFFu)); }
};
using DropoutTest = RandomTest;

uint64_t random64(Rng& rng) {
  return (uint64_t(rng.below(UINT32_MAX)) << 32) | rng.below(UINT32_MAX);
}

ops::ref::Stream randomStream(Rng& rng) {
  return {random64(rng), random64(rng), rng.below(1000)};
}

ops::TensorView stateView(const vk::Buffer& b) {
  return ops::view(b, {4}, 0, ops::DType::U32);
}

// Largest |got_i - want_i|. The random ops are tested against absolute bounds that follow
// from their value range: allClose's max|want| normalisation turns a 1-ulp difference into a
// large error whenever a short draw happens to land near 0.
double maxAbsError(std::span<const float> got, std::span<const float> want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - double(want[i]));
    if (!(err <= worst)) worst = err;  // also keeps a NaN
  }
  return worst;
}

// Random123's tests/kat_vectors, the three "philox4x32 10" lines (counter, key -> output).
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    std::array<uint32_t, 4> ctr;
    std::array<uint32_t, 2> key;
    std::array<uint32_t, 4> want;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) EXPECT_EQ(ops::ref::philox4x32_10(k.ctr, k.key), k.want);
}

TEST_F(RandomTest, PhiloxOnTheDeviceMatchesTheKnownAnswerAndTheCpuBitForBit) {
  // Seed 0, offset 0, stream 0: block 0 is Random123's all-zero known answer.
  {
    auto rng = stateBuffer(ops::RngState::make(0, 0));
    auto out = poisonedWords(4);
    vk::Recorder rec(ctx());
    ops::randomBits(rec, ops::view(out, {4}, 0, ops::DType::U32), stateView(rng));
    rec.submit();
    const std::vector<uint32_t> want = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    EXPECT_EQ(readWords(out, 4), want);
  }
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (int64_t n : {1, 3, 17, 129, 4099, 100001}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    ops::ref::Stream s = randomStream(rng);
    if (n == 17) s.offset = 0xFFFFFFFFull;  // the offset's low word at its limit
    std::vector<uint32_t> want(n);
    ops::ref::randomBits(s, want.data(), n);
    auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
    auto out = poisonedWords(n);
    vk::Recorder rec(ctx());
    ops::randomBits(rec, ops::view(out, {n}, 0, ops::DType::U32), stateView(state), s.stream);
    rec.submit();
    EXPECT_EQ(readWords(out, n), want);
  }
}

TEST_F(RandomTest, SameStateGivesSameBitsAndStreamsOffsetsSeedsDiffer) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 1000;
  const ops::ref::Stream s = randomStream(rng);
  auto draw = [&](uint64_t seed, uint64_t offset, uint32_t stream) {
    auto state = stateBuffer(ops::RngState::make(seed, offset));
    auto out = poisonedWords(n);
    vk::Recorder rec(ctx());
    ops::randomBits(rec, ops::view(out, {n}, 0, ops::DType::U32), stateView(state), stream);
    rec.submit();
    return readWords(out, n);
  };
  const auto base = draw(s.seed, s.offset, s.stream);
  EXPECT_EQ(draw(s.seed, s.offset, s.stream), base);
  auto agreeing = [&](const std::vector<uint32_t>& other) {
    int same = 0;
    for (int64_t i = 0; i < n; ++i) same += other[i] == base[i];
    return same;
  };
  // Independent 32-bit words agree with probability 2^-32 each.
  EXPECT_EQ(agreeing(draw(s.seed, s.offset, s.stream + 1)), 0);
  EXPECT_EQ(agreeing(draw(s.seed, s.offset + 1, s.stream)), 0);
  EXPECT_EQ(agreeing(draw(s.seed ^ (uint64_t(1) << 40), s.offset, s.stream)), 0);
}

TEST_F(RandomTest, ReplayWithAdvanceOnDeviceDrawsTheNextOffsets) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  ops::ref::Stream s = randomStream(rng);
  s.offset = 0xFFFFFFFEull + (uint64_t(rng.below(1000)) << 32);  // carries into offset_hi
  const int64_t n = 37;
  auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
  auto out = poisonedWords(n);
  vk::Recorder rec(ctx());
  ops::randomBits(rec, ops::view(out, {n}, 0, ops::DType::U32), stateView(state), s.stream);
  ops::rngAdvance(rec, stateView(state), 3);
  for (int replay = 0; replay < 3; ++replay) {
    rec.submit();
    std::vector<uint32_t> want(n);
    ops::ref::randomBits(s, want.data(), n);
    EXPECT_EQ(readWords(out, n), want) << "replay " << replay;
    s.offset += 3;
  }
  const auto words = readWords(state, 4);
  EXPECT_EQ(words[2], uint32_t(s.offset));
  EXPECT_EQ(words[3], uint32_t(s.offset >> 32));
  EXPECT_EQ(uint64_t(words[1]) << 32 | words[0], s.seed);
}

TEST_F(RandomTest, UniformMatchesCpuAndHasTheRightMoments) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const float lo = -2.0f, hi = 3.0f;
  for (int64_t n : {1, 3, 17, 129, 131071}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const ops::ref::Stream s = randomStream(rng);
    std::vector<float> want(n);
    ops::ref::uniform(s, lo, hi, want.data(), n);
    auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
    auto out = poisoned(ctx(), {n});
    vk::Recorder rec(ctx());
    ops::uniform(rec, out.view(), lo, hi, stateView(state), s.stream);
    rec.submit();
    const auto got = download(ctx(), out);
    // lo + (hi - lo) * u in fp32 from an exact u: two roundings, each within 2^-24 of the
    // largest magnitude involved.
    const double range = std::max({std::fabs(lo), std::fabs(hi), std::fabs(hi - lo)});
    EXPECT_LE(maxAbsError(got, want), 0x1p-22 * range);
    double sum = 0, sum2 = 0;
    for (float x : got) {
      ASSERT_TRUE(x >= lo && x <= hi) << x;
      sum += x;
    }
    if (n < 100000) continue;
    const double mean = sum / n;
    for (float x : got) sum2 += (x - mean) * (x - mean);
    const double var = sum2 / (n - 1);
    const double w = hi - lo, want_var = w * w / 12, mu4 = w * w * w * w / 80;
    // 5 sigma: the mean has sd sqrt(var/n); the sample variance sqrt((mu4 - var^2)/n).
    EXPECT_NEAR(mean, (lo + hi) / 2.0, 5 * std::sqrt(want_var / n));
    EXPECT_NEAR(var, want_var, 5 * std::sqrt((mu4 - want_var * want_var) / n));
  }
}

TEST_F(RandomTest, NormalMatchesCpuAndHasTheRightMoments) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const float mean = 0.5f, stddev = 2.0f;
  for (int64_t n : {1, 3, 17, 129, 131071}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const ops::ref::Stream s = randomStream(rng);
    std::vector<float> want(n);
    ops::ref::normal(s, mean, stddev, want.data(), n);
    auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
    auto out = poisoned(ctx(), {n});
    vk::Recorder rec(ctx());
    ops::normal(rec, out.view(), mean, stddev, stateView(state), s.stream);
    rec.submit();
    const auto got = download(ctx(), out);
    // log, sqrt, sin and cos are approximate on the device; Vulkan only promises sin/cos to
    // 2^-11 absolute on [-pi, pi], times |z| <= 5.8: 3e-3 * stddev. lavapipe is within 4e-6;
    // any wrong pairing or mapping of the words is off by O(stddev).
    EXPECT_LE(maxAbsError(got, want), 3e-3 * stddev);
    if (n < 100000) continue;
    double sum = 0, sum2 = 0;
    for (float x : got) {
      ASSERT_TRUE(std::isfinite(x));
      ASSERT_LE(std::fabs(x - mean), stddev * 5.8f);
      sum += x;
    }
    const double m = sum / n;
    for (float x : got) sum2 += (x - m) * (x - m);
    const double var = sum2 / (n - 1), want_var = double(stddev) * stddev;
    // 5 sigma: mean sd = stddev/sqrt(n); sample-variance sd = var*sqrt(2/n).
    EXPECT_NEAR(m, mean, 5 * stddev / std::sqrt(double(n)));
    EXPECT_NEAR(var, want_var, 5 * want_var * std::sqrt(2.0 / n));
  }
}

// z = mu + exp(log_sigma) * eps against the CPU stream, and the backward drawing the same eps
// again: dlog_sigma = dz * exp(log_sigma) * eps, overwriting and accumulating. The device's
// sin/cos/log may differ from the host's by the bound the normal test states (3e-3 for a
// standard normal), scaled here by exp(log_sigma) <= e and |dz| <= 1.
TEST_F(RandomTest, ReparameterizeMatchesCpuAndItsBackwardRedrawsEps) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (int64_t n : {1, 3, 17, 4099}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const ops::ref::Stream s = randomStream(rng);
    const auto mu = rng.normal(n), log_sigma = rng.uniform(n, -2.0f, 1.0f), dz = rng.uniform(n),
               init = rng.uniform(n);
    std::vector<float> eps(n), want_z(n), want_d(n);
    ops::ref::normal(s, 0.0f, 1.0f, eps.data(), n);
    ops::ref::reparameterize(s, mu.data(), log_sigma.data(), want_z.data(), n);
    for (int64_t i = 0; i < n; ++i)
      want_d[i] = float(double(dz[i]) * std::exp(double(log_sigma[i])) * double(eps[i]));
    auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
    auto d_mu = upload(ctx(), {n}, mu), d_ls = upload(ctx(), {n}, log_sigma),
         d_dz = upload(ctx(), {n}, dz), z = poisoned(ctx(), {n}), dls = poisoned(ctx(), {n}),
         dls_acc = upload(ctx(), {n}, init);
    vk::Recorder rec(ctx());
    ops::reparameterize(rec, d_mu.view(), d_ls.view(), z.view(), stateView(state), s.stream);
    ops::reparameterizeBackward(rec, d_dz.view(), d_ls.view(), dls.view(), stateView(state),
                                s.stream);
    ops::reparameterizeBackward(rec, d_dz.view(), d_ls.view(), dls_acc.view(), stateView(state),
                                s.stream, ops::Write::Accumulate);
    rec.submit();
    const auto got_z = download(ctx(), z), got_d = download(ctx(), dls);
    EXPECT_LE(maxAbsError(got_z, want_z), 3e-3 * std::exp(1.0));
    EXPECT_LE(maxAbsError(got_d, want_d), 3e-3 * std::exp(1.0));
    // The backward's eps is the forward's: (z - mu) * dz equals dlog_sigma to rounding.
    for (int64_t i = 0; i < n; ++i)
      ASSERT_NEAR((got_z[i] - mu[i]) * dz[i], got_d[i], 1e-5f * (1.0f + std::fabs(got_d[i]))) << i;
    const auto got_acc = download(ctx(), dls_acc);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got_acc[i], init[i] + got_d[i], 1e-6f) << i;
  }
  auto a = poisoned(ctx(), {4, 3}), b = poisoned(ctx(), {3, 4});
  auto state = stateBuffer(ops::RngState::make(1));
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::reparameterize(rec, a.view(), b.view(), a.view(), stateView(state));
      },
      "reparameterize: mu (4,3) and log_sigma (3,4) must have the same shape");
}

// In f16 or bf16, or mixed with f32 (f32 parameters, a bf16 z): the same eps as the f32 path
// on the same (rounded) inputs, each output that f32 result rounded once (closeInFormat; 1e-6
// of the largest covers the f32 kernels' own last-bit differences, e.g. a fused multiply-add
// in one build and not the other). Views 2 bytes into their buffers.
TEST_F(RandomTest, ReparameterizeInSixteenBitsDrawsTheSameEpsAsF32) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  constexpr double kTolerance = 1e-6;
  struct Formats {
    DType params, z;  // mu, log_sigma and dlog_sigma; z and dz
  };
  for (const Formats fm : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                           Formats{DType::F32, DType::BF16}, Formats{DType::BF16, DType::F32}})
    for (int64_t n : {17, 4099}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " " << ops::dtypeName(fm.params)
                                      << " parameters, " << ops::dtypeName(fm.z) << " z");
      const ops::ref::Stream s = randomStream(rng);
      const auto mu = ops::ref::roundTo(fm.params, rng.normal(n));
      const auto log_sigma = ops::ref::roundTo(fm.params, rng.uniform(n, -2.0f, 1.0f));
      const auto dz = ops::ref::roundTo(fm.z, rng.uniform(n));
      const auto init = ops::ref::roundTo(fm.params, rng.uniform(n));
      auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
      // The f32 path on the same values.
      auto mu32 = upload(ctx(), {n}, mu), ls32 = upload(ctx(), {n}, log_sigma);
      auto dz32 = upload(ctx(), {n}, dz), z32 = poisoned(ctx(), {n});
      auto d32 = poisoned(ctx(), {n}), acc32 = upload(ctx(), {n}, init);
      auto mu16 = shiftedUpload(ctx(), {n}, mu, fm.params);
      auto ls16 = shiftedUpload(ctx(), {n}, log_sigma, fm.params);
      auto dz16 = shiftedUpload(ctx(), {n}, dz, fm.z), z16 = shiftedPoisoned(ctx(), {n}, fm.z);
      auto d16 = shiftedPoisoned(ctx(), {n}, fm.params);
      auto acc16 = shiftedUpload(ctx(), {n}, init, fm.params);
      vk::Recorder rec(ctx());
      ops::reparameterize(rec, mu32.view(), ls32.view(), z32.view(), stateView(state), s.stream);
      ops::reparameterizeBackward(rec, dz32.view(), ls32.view(), d32.view(), stateView(state),
                                  s.stream);
      ops::reparameterizeBackward(rec, dz32.view(), ls32.view(), acc32.view(), stateView(state),
                                  s.stream, ops::Write::Accumulate);
      ops::reparameterize(rec, mu16.view, ls16.view, z16.view, stateView(state), s.stream);
      ops::reparameterizeBackward(rec, dz16.view, ls16.view, d16.view, stateView(state), s.stream);
      ops::reparameterizeBackward(rec, dz16.view, ls16.view, acc16.view, stateView(state), s.stream,
                                  ops::Write::Accumulate);
      rec.submit();
      EXPECT_TRUE(
          closeInFormat(downloadShifted(ctx(), z16), download(ctx(), z32), fm.z, kTolerance));
      EXPECT_TRUE(
          closeInFormat(downloadShifted(ctx(), d16), download(ctx(), d32), fm.params, kTolerance));
      EXPECT_TRUE(closeInFormat(downloadShifted(ctx(), acc16), download(ctx(), acc32), fm.params,
                                kTolerance));
    }
  // z over mu's bytes in another format would read and write them differently.
  auto a = upload(ctx(), {8}, rng.uniform(8), DType::F16), b = poisoned(ctx(), {8}, DType::F16);
  auto state = stateBuffer(ops::RngState::make(1));
  expectShapeError(
      ctx(),
      [&](vk::Recorder& rec) {
        ops::reparameterize(rec, a.view(), b.view(), ops::view(a.buffer, {8}, 0, DType::BF16),
                            stateView(state));
      },
      "reparameterize: z (bf16) in place of mu (f16) needs its dtype");
}

TEST_F(RandomTest, CategoricalMatchesCpuAndFrequencies) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  {
    // Exact ids against the CPU. The kernel adds in fp32, the reference in double, so a
    // draw within a rounding error of a CDF step may land on either side: allow that only.
    const int64_t rows = 1027, cols = 17;
    auto w = rng.uniform(rows * cols, 0.0f, 1.0f);
    for (int64_t i = 0; i < rows * cols; i += 5) w[i] = 0.0f;  // some impossible choices
    const ops::ref::Stream s = randomStream(rng);
    std::vector<uint32_t> want(rows);
    ops::ref::categorical(s, w.data(), want.data(), rows, cols);
    auto dw = upload(ctx(), {rows, cols}, w);
    auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
    auto out = poisonedWords(rows);
    vk::Recorder rec(ctx());
    ops::categorical(rec, dw.view(), ops::view(out, {rows}, 0, ops::DType::U32), stateView(state),
                     s.stream);
    rec.submit();
    const auto got = readWords(out, rows);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_LT(got[r], uint32_t(cols));
      EXPECT_GT(w[r * cols + got[r]], 0.0f) << "row " << r << " picked a zero weight";
      if (got[r] == want[r]) continue;
      double total = 0, cdf = 0;
      for (int64_t j = 0; j < cols; ++j) total += w[r * cols + j];
      const double target = double(s.word(r) >> 8) * 0x1p-24 * total;
      double nearest = 1e30;
      for (int64_t j = 0; j < cols; ++j) {
        cdf += w[r * cols + j];
        nearest = std::min(nearest, std::fabs(cdf - target));
      }
      EXPECT_LT(nearest, 1e-5 * total) << "row " << r << ": got " << got[r] << ", want " << want[r];
    }
  }
  {
    // Frequencies: N draws from one distribution, each count within 5 binomial sigma.
    const int64_t rows = 65536;
    const float p[] = {0.1f, 0.2f, 0.0f, 0.3f, 0.4f};
    std::vector<float> w;
    for (int64_t r = 0; r < rows; ++r) w.insert(w.end(), std::begin(p), std::end(p));
    auto dw = upload(ctx(), {rows, 5}, w);
    auto state = stateBuffer(ops::RngState::make(random64(rng)));
    auto out = poisonedWords(rows);
    vk::Recorder rec(ctx());
    ops::categorical(rec, dw.view(), ops::view(out, {rows}, 0, ops::DType::U32), stateView(state));
    rec.submit();
    int64_t count[5] = {};
    for (uint32_t id : readWords(out, rows)) {
      ASSERT_LT(id, 5u);
      ++count[id];
    }
    for (int j = 0; j < 5; ++j)
      EXPECT_NEAR(double(count[j]), rows * p[j], 5 * std::sqrt(rows * p[j] * (1 - p[j])) + 1e-9)
          << "choice " << j;
  }
}

TEST_F(DropoutTest, ForwardMatchesCpuBitForBit) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (float p : {0.0f, 0.1f, 0.5f, 0.9f}) {
    for (int64_t n : {1, 3, 17, 129, 4099}) {
      SCOPED_TRACE(testing::Message() << "p=" << p << " n=" << n);
      const ops::ref::Stream s = randomStream(rng);
      const auto x = rng.uniform(n);
      std::vector<float> want(n);
      ops::ref::dropout(s, p, x.data(), want.data(), n);
      auto dx = upload(ctx(), {n}, x);
      auto y = poisoned(ctx(), {n});
      auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
      vk::Recorder rec(ctx());
      ops::dropout(rec, dx.view(), y.view(), p, stateView(state), s.stream);
      rec.submit();
      const auto got = download(ctx(), y);
      // One fp32 multiply by the same scale, or an exact 0: identical bits.
      EXPECT_EQ(0, std::memcmp(got.data(), want.data(), n * 4));
    }
  }
}

TEST_F(DropoutTest, KeepRateIsWithinFiveSigma) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 131071;
  for (float p : {0.1f, 0.3f, 0.5f}) {
    const auto x = rng.uniform(n, 1.0f, 2.0f);  // never 0, so a 0 out means dropped
    auto dx = upload(ctx(), {n}, x);
    auto y = poisoned(ctx(), {n});
    auto state = stateBuffer(ops::RngState::make(random64(rng), random64(rng)));
    vk::Recorder rec(ctx());
    ops::dropout(rec, dx.view(), y.view(), p, stateView(state));
    rec.submit();
    const auto got = download(ctx(), y);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (got[i] == 0.0f) continue;
      ++kept;
      ASSERT_FLOAT_EQ(got[i], x[i] / (1.0f - p));
    }
    const double rate = double(kept) / n, sigma = std::sqrt(p * (1.0 - p) / n);
    EXPECT_NEAR(rate, 1.0 - p, 5 * sigma) << "p=" << p;
  }
}

TEST_F(DropoutTest, BackwardRegeneratesTheForwardMask) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const float p = 0.35f;
  for (int64_t n : {1, 3, 17, 129, 4099}) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    const ops::ref::Stream s = randomStream(rng);
    const auto x = rng.uniform(n, 1.0f, 2.0f), dy = rng.uniform(n), dx0 = rng.uniform(n);
    auto d_x = upload(ctx(), {n}, x), d_dy = upload(ctx(), {n}, dy);
    auto y = poisoned(ctx(), {n}), dx = poisoned(ctx(), {n});
    auto dx_acc = upload(ctx(), {n}, dx0);
    auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
    vk::Recorder rec(ctx());
    ops::dropout(rec, d_x.view(), y.view(), p, stateView(state), s.stream);
    ops::dropoutBackward(rec, d_dy.view(), dx.view(), p, stateView(state), s.stream);
    ops::dropoutBackward(rec, d_dy.view(), dx_acc.view(), p, stateView(state), s.stream,
                         ops::Write::Accumulate);
    rec.submit();
    const auto got_y = download(ctx(), y), got_dx = download(ctx(), dx);
    std::vector<float> want(n);
    ops::ref::dropout(s, p, dy.data(), want.data(), n);
    EXPECT_EQ(0, std::memcmp(got_dx.data(), want.data(), n * 4));
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got_y[i] == 0.0f, got_dx[i] == 0.0f && dy[i] != 0.0f) << "mask differs at " << i;
    // dx0 + dy * scale: a device may fuse the multiply-add, so either rounding is right.
    const auto got_acc = download(ctx(), dx_acc);
    const float scale = float(1.0 / (1.0 - double(p)));
    for (int64_t i = 0; i < n; ++i) {
      if (got_y[i] == 0.0f) {
        ASSERT_EQ(got_acc[i], dx0[i]) << i;
      } else {
        const float separate = dx0[i] + want[i], fused = std::fma(dy[i], scale, dx0[i]);
        ASSERT_TRUE(got_acc[i] == separate || got_acc[i] == fused)
            << i << ": " << got_acc[i] << " vs " << separate << " or " << fused;
      }
    }
  }
}

// In f16 or bf16, or mixed with f32: the same mask as the f32 path on the same (rounded)
// inputs, and each output that f32 result rounded once: bit for bit overwriting (one multiply,
// or an exact 0), to one rounding accumulating (dx0 + dy * scale may be fused in one build and
// not the other). Views 2 bytes into their buffers; y in place of x in one format.
TEST_F(DropoutTest, SixteenBitTensorsDrawTheSameMaskAsF32) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  using ops::DType;
  const float p = 0.35f;
  struct Formats {
    DType in, out;
  };
  for (const Formats fm : {Formats{DType::F16, DType::F16}, Formats{DType::BF16, DType::BF16},
                           Formats{DType::BF16, DType::F32}, Formats{DType::F32, DType::BF16}})
    for (int64_t n : {17, 4099}) {
      SCOPED_TRACE(testing::Message() << "n=" << n << " " << ops::dtypeName(fm.in) << " -> "
                                      << ops::dtypeName(fm.out));
      const ops::ref::Stream s = randomStream(rng);
      const auto x = ops::ref::roundTo(fm.in, rng.uniform(n));
      const auto dx0 = ops::ref::roundTo(fm.out, rng.uniform(n));
      auto state = stateBuffer(ops::RngState::make(s.seed, s.offset));
      auto x32 = upload(ctx(), {n}, x), y32 = poisoned(ctx(), {n}), acc32 = upload(ctx(), {n}, dx0);
      auto x16 = shiftedUpload(ctx(), {n}, x, fm.in), y16 = shiftedPoisoned(ctx(), {n}, fm.out);
      auto dx16 = shiftedPoisoned(ctx(), {n}, fm.out);
      auto acc16 = shiftedUpload(ctx(), {n}, dx0, fm.out);
      auto inplace = upload(ctx(), {n}, x, fm.in);
      vk::Recorder rec(ctx());
      ops::dropout(rec, x32.view(), y32.view(), p, stateView(state), s.stream);
      ops::dropoutBackward(rec, x32.view(), acc32.view(), p, stateView(state), s.stream,
                           ops::Write::Accumulate);
      ops::dropout(rec, x16.view, y16.view, p, stateView(state), s.stream);
      ops::dropoutBackward(rec, x16.view, dx16.view, p, stateView(state), s.stream);
      ops::dropoutBackward(rec, x16.view, acc16.view, p, stateView(state), s.stream,
                           ops::Write::Accumulate);
      ops::dropout(rec, inplace.view(), inplace.view(), p, stateView(state), s.stream);
      rec.submit();
      const auto want = download(ctx(), y32);
      EXPECT_EQ(downloadShifted(ctx(), y16), ops::ref::roundTo(fm.out, want));
      EXPECT_EQ(downloadShifted(ctx(), dx16), ops::ref::roundTo(fm.out, want));
      EXPECT_EQ(download(ctx(), inplace), ops::ref::roundTo(fm.in, want));
      EXPECT_TRUE(
          closeInFormat(downloadShifted(ctx(), acc16), download(ctx(), acc32), fm.out, 1e-6));
    }
}

TEST_F(DropoutTest, GradientMatchesFiniteDifferences) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = 37;
  const float p = 0.4f;
  std::vector<float> x = rng.uniform(n);
  const std::vector<float> w = rng.uniform(n);
  auto state = stateBuffer(ops::RngState::make(random64(rng), random64(rng)));
  auto dx_in = upload(ctx(), {n}, x), y = poisoned(ctx(), {n});
  auto dw = upload(ctx(), {n}, w), dx = poisoned(ctx(), {n});
  vk::Recorder backward(ctx());
  ops::dropoutBackward(backward, dw.view(), dx.view(), p, stateView(state), 5);
  backward.submit();
  const auto analytic = download(ctx(), dx);
  // The forward recording is replayed for every perturbed input.
  vk::Recorder forward(ctx());
  ops::dropout(forward, dx_in.view(), y.view(), p, stateView(state), 5);
  auto loss = [&] {
    ctx().staging().upload(dx_in.buffer, 0, x.data(), n * 4);
    forward.submit();
    return weightedSum(download(ctx(), y), w);
  };
  EXPECT_TRUE(checkGradients(loss, {{"x", &x, analytic}}, rng));
}

TEST_F(DropoutTest, RejectsBadArgumentsBeforeRecording) {
  Rng rng;
  auto x = upload(ctx(), {4, 8}, rng.uniform(32)), y = poisoned(ctx(), {4, 8});
  auto y_wrong = poisoned(ctx(), {8, 4});
  auto state = stateBuffer(ops::RngState::make(1));
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::dropout(rec, x.view(), y_wrong.view(), 0.5f, stateView(state)); },
      "dropout: x (4,8) and y (8,4)");
  expectShapeError(
      rec, [&] { ops::dropout(rec, x.view(), y.view(), 1.0f, stateView(state)); },
      "outside [0, 1)");
  expectShapeError(
      rec, [&] { ops::dropout(rec, x.view(), y.view(), -0.1f, stateView(state)); },
      "outside [0, 1)");
  expectShapeError(
      rec, [&] { ops::dropout(rec, x.view(), y.view(), std::nanf(""), stateView(state)); },
      "outside [0, 1)");
  expectShapeError(
      rec,
      [&] {
        ops::dropout(rec, x.view(), y.view(), 0.5f, ops::view(state, {3}, 0, ops::DType::U32));
      },
      "rng state (3)");
  expectShapeError(
      rec, [&] { ops::dropout(rec, x.view(), y.view(), 0.5f, ops::view(state, {4})); },
      "rng must be u32");
  expectShapeError(
      rec,
      [&] {
        ops::dropout(rec, ops::view(x.buffer, {4, 8}, 0, ops::DType::U32), y.view(), 0.5f,
                     stateView(state));
      },
      "dropout: x must be f32, f16 or bf16, got u32");
  expectShapeError(
      rec,
      [&] {
        ops::dropout(rec, x.view(), ops::view(x.buffer, {4, 8}, 0, ops::DType::BF16), 0.5f,
                     stateView(state));
      },
      "dropout: y (bf16) in place of x (f32) needs its dtype");
  expectShapeError(
      rec, [&] { ops::uniform(rec, ops::view(y.buffer, {64}), 0, 1, stateView(state)); },
      "needs 256 bytes");
  expectShapeError(
      rec, [&] { ops::randomBits(rec, y.view(), stateView(state)); }, "out must be u32");
  expectShapeError(
      rec, [&] { ops::categorical(rec, x.view(), y.view(), stateView(state)); },
      "out needs one id per row (4)");
  EXPECT_EQ(rec.dispatchCount(), 0u);
}

}  // namespace
}  // namespace vkgrad::test
