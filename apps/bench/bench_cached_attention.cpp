// vkgrad-bench cached-attention: one decoding step's attention over a key/value cache
// (ops/cached_attention.h): the new rows written into the caches, then R query rows attending
// over cache rows [0, position + r]. The kernels read the keys and values once per query head,
// so the step is bandwidth-bound: bytes = 2 caches x (position + R) rows x H x D floats, plus
// q, o and the new k and v. Which build ran is the variant: "usual", or "sb4" where the device
// binds fewer than the 5 storage buffers they need (`VKGRAD_LIMITS=storage-buffers=4` shows it
// on any device: A/B the two in alternating runs).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/cached_attention.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

constexpr double kCheckTolerance = 1e-4;

void declare(Cli& cli) {
  cli.option("h", "query heads", "6");
  cli.option("kv-heads", "the caches' heads, dividing --h (0: --h)", "0");
  cli.option("d", "head dim", "64");
  cli.option("rows", "cache rows (the model's context)", "256");
  cli.option("position", "cache rows already filled: the step's first new row", "255");
  cli.option("r", "new rows per step (1: decoding one token)", "1");
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t h = cli.getInt("h", 1, 1 << 12), d = cli.getInt("d", 1, 256);
  const int64_t rows = cli.getInt("rows", 1, 1 << 20), r = cli.getInt("r", 1, 1 << 12);
  int64_t hkv = cli.getInt("kv-heads", 0, 1 << 12);
  if (hkv == 0) hkv = h;
  if (h % hkv != 0) cli.fail("--kv-heads must divide --h");
  const int64_t position = cli.getInt("position", 0, rows - r);
  const int64_t keys = position + r, hd = h * d, kvd = hkv * d;
  const bool four = ops::fewerStorageBuffers(context, 5);
  std::fprintf(stderr,
               "vkgrad-bench: cached attention, %lld heads (%lld cached), D %lld, %lld "
               "new rows at %lld of %lld, the %s build, on %s\n",
               (long long)h, (long long)hkv, (long long)d, (long long)r, (long long)position,
               (long long)rows, four ? "sb4" : "usual", context.info().name.c_str());

  const std::vector<float> kc0 = benchData(size_t(rows * kvd), -1.0f, 1.0f, 1),
                           vc0 = benchData(size_t(rows * kvd), -1.0f, 1.0f, 2),
                           q = benchData(size_t(r * hd), -1.0f, 1.0f, 3),
                           k = benchData(size_t(r * kvd), -1.0f, 1.0f, 4),
                           v = benchData(size_t(r * kvd), -1.0f, 1.0f, 5);
  auto upload = [&](const std::vector<float>& host) {
    vk::Buffer b = context.allocator().allocate(host.size() * 4);
    context.staging().upload(b, 0, host.data(), host.size() * 4);
    return b;
  };
  const vk::Buffer bkc = upload(kc0), bvc = upload(vc0), bq = upload(q), bk = upload(k),
                   bv = upload(v), bo = context.allocator().allocate(size_t(r * hd) * 4);
  const uint32_t word = uint32_t(position);
  const vk::Buffer bpos = context.allocator().allocate(4);
  context.staging().upload(bpos, 0, &word, 4);
  const ops::Shape cache{1, rows, hkv, d}, queries{1, r, h, d}, fresh{1, r, hkv, d};
  const ops::TensorView kcv = ops::view(bkc, cache), vcv = ops::view(bvc, cache),
                        pv = ops::view(bpos, {1}, 0, ops::DType::U32);
  const Timing timing =
      timeDispatches(context, options, "cached attention", [&](vk::Recorder& rec) {
        ops::writeKvCache(rec, {ops::view(bk, fresh)}, {ops::view(bv, fresh)}, kcv, vcv, pv);
        ops::cachedAttention(rec, {ops::view(bq, queries)}, kcv, vcv, pv, {ops::view(bo, queries)});
      });

  // The caches' first `keys` rows as the step leaves them, and causal attention over them.
  std::vector<float> kw(kc0.begin(), kc0.begin() + keys * kvd),
      vw(vc0.begin(), vc0.begin() + keys * kvd), want(size_t(r * hd)), lse(size_t(h * r));
  std::copy(k.begin(), k.end(), kw.begin() + position * kvd);
  std::copy(v.begin(), v.end(), vw.begin() + position * kvd);
  ops::ref::AttentionShape s{1, h, r, keys, d, /*causal=*/true};
  s.hkv = hkv;
  s.k_stride = s.v_stride = kvd;
  ops::ref::attention(s, q.data(), kw.data(), vw.data(), want.data(), lse.data());
  std::vector<float> got(size_t(r * hd));
  context.staging().download(bo, 0, got.data(), got.size() * 4);

  BandwidthResult result{"cached_attn",
                         four ? "sb4" : "usual",
                         "auto",
                         {{"h", h}, {"d", d}, {"keys", keys}},
                         4.0 * double(2 * keys * kvd + 2 * r * hd + 2 * r * kvd),
                         timing};
  result.error = normalisedError(got, want);
  result.tolerance = kCheckTolerance;
  return reportBandwidth(context, options, result, copyGbps(context, options, 2 * keys * kvd));
}

}  // namespace

const BenchOp& cachedAttentionBench() {
  static const BenchOp op{"cached-attention",
                          "one decoding step's cache write and attention over the key/value "
                          "cache (which build: usual, or sb4 within 4 storage buffers)",
                          declare, run};
  return op;
}

}  // namespace vkgrad::apps
