// Grouped-query attention in the attention kernels: k and v with Hkv heads, fewer than q's H,
// query head h reading key/value head h / (H / Hkv). Forward and backward of every variant
// lavapipe runs (Shared, Texel, FragmentEmulated) against the fp64 reference with repeat_kv
// semantics, at odd shapes; the KV cache with Hkv heads; and the refusals.
#include <algorithm>
#include <cmath>
#include <span>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/not_run.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "ops/attention_check.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/ops/attention_unfused.h"
#include "vkgrad/ops/cached_attention.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using ops::AttentionOptions;
using ops::AttentionTensor;
using ops::AttentionVariant;
using ops::DType;
using ops::Shape;
using ops::Write;

// As tests/ops/test_attention.cpp (fp32 kernels: 2e-5) and test_attention_fragment.cpp (fp16
// products on fp16-exact inputs: 2e-3).
constexpr double kTolerance = 2e-5, kFragmentTolerance = 2e-3;

struct Case {
  int64_t b, h, hkv, tq, tk, d;
  bool causal;
  AttentionVariant variant;
};

std::string describe(const Case& c) {
  return "B " + std::to_string(c.b) + " H " + std::to_string(c.h) + " Hkv " +
         std::to_string(c.hkv) + " Tq " + std::to_string(c.tq) + " Tk " + std::to_string(c.tk) +
         " D " + std::to_string(c.d) + (c.causal ? " causal " : " ") +
         ops::attentionVariantName(c.variant);
}

class AttentionGqaTest : public VkTest {
 protected:
  // Forward and backward on random data against the reference (ops/attention_check.h);
  // gradients start random when accumulating, else poisoned. q, k, v and dout stored in
  // `inputs`; the outputs f32.
  void check(const Case& c, Rng& rng, Write w = Write::Overwrite, DType inputs = DType::F32) {
    SCOPED_TRACE(describe(c) + " " + ops::dtypeName(inputs));
    const bool fragment = c.variant == AttentionVariant::FragmentEmulated;
    AttentionCheck(ctx(), rng, {c.b, c.h, c.hkv, c.tq, c.tk, c.d, c.causal},
                   {c.variant, fragment ? kFragmentTolerance : kTolerance, inputs, fragment, w})
        .run();
  }

  // The SIMT variants this device runs at head dim d (Texel: CPU devices with subgroup shuffle,
  // d % 4 == 0; a CPU device without shuffle says it ran Shared only).
  std::vector<AttentionVariant> simt(int64_t d) const {
    const vk::DeviceInfo& info = ctx().info();
    const bool shuffle = info.subgroup_compute && info.subgroup_shuffle && info.subgroup_size > 0;
    if (info.isCpu() && !shuffle) noteNotRun("the Texel variant", "subgroupShuffle");
    if (info.isCpu() && shuffle && d % 4 == 0)
      return {AttentionVariant::Shared, AttentionVariant::Texel};
    return {AttentionVariant::Shared};
  }
};

TEST_F(AttentionGqaTest, SharedAndTexelMatchRepeatKvReference) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) {
    for (AttentionVariant variant : simt(8)) {
      check({2, 6, 2, 13, 13, 24, causal, variant}, rng);
      check({1, 4, 1, 5, 11, 8, causal, variant}, rng);  // one key/value head; Tq < Tk
      check({1, 6, 3, 11, 4, 8, causal, variant}, rng);  // Tq > Tk: early rows see no key
    }
    check({1, 6, 2, 9, 9, 5, causal, AttentionVariant::Shared}, rng);  // D not a multiple of 4
  }
}

// One fused (B, T, (H+2*Hkv)*D) projection, [q heads | k heads | v heads], read in place and
// its gradients written back in that layout.
TEST_F(AttentionGqaTest, ReadsAndWritesStridedFusedQkv) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (AttentionVariant variant : simt(8)) {
    SCOPED_TRACE(ops::attentionVariantName(variant));
    FusedQkvCheck(ctx(), rng, {2, 6, 2, 13, 13, 8, true}, {variant, kTolerance}).run();
  }
}

TEST_F(AttentionGqaTest, GradientsAccumulate) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (AttentionVariant variant : simt(8))
    check({1, 4, 2, 7, 7, 8, true, variant}, rng, Write::Accumulate);
}

// 16-bit inputs go through the same indexing (the kernels' ".s16" builds).
TEST_F(AttentionGqaTest, SixteenBitInputsMatchRepeatKvReference) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (AttentionVariant variant : simt(8))
    check({1, 4, 2, 9, 9, 8, true, variant}, rng, Write::Overwrite, DType::BF16);
}

TEST_F(AttentionGqaTest, EmulatedFragmentKernelsMatchRepeatKvReference) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (bool causal : {false, true}) {
    const Case c{1, 4, 2, 19, 19, 16, causal, AttentionVariant::FragmentEmulated};
    if (ctx().info().fp16 && ctx().info().storage_16bit)
      check(c, rng);
    else  // the build needs fp16 arithmetic and 16-bit storage: refused, never run
      EXPECT_THROW(check(c, rng), Error);
  }
}

// H = 1 against a multi-head k and v: Hkv must divide H. The message names the op and shapes,
// before anything is recorded.
TEST_F(AttentionGqaTest, RefusesKeyValueHeadsThatDoNotDivideTheQueryHeads) {
  auto q = poisoned(ctx(), {1, 5, 6, 8}), k = poisoned(ctx(), {1, 5, 4, 8}),
       o = poisoned(ctx(), {1, 5, 6, 8}), lse = poisoned(ctx(), {1, 6, 5});
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::attention(rec, {q.view()}, {k.view()}, {k.view()}, {o.view()}, lse.view()); },
      "attention: q (1,5,6,8) has 6 heads and k (1,5,4,8) 4: the key/value heads must divide "
      "the query heads");
  auto k8 = poisoned(ctx(), {1, 5, 12, 8});
  expectShapeError(
      rec,
      [&] { ops::attention(rec, {q.view()}, {k8.view()}, {k8.view()}, {o.view()}, lse.view()); },
      "k (1,5,12,8) 12");
  // v with k's heads or not: v (1,5,3,8) against k (1,5,2,8).
  auto k2 = poisoned(ctx(), {1, 5, 2, 8}), v3 = poisoned(ctx(), {1, 5, 3, 8});
  expectShapeError(
      rec,
      [&] { ops::attention(rec, {q.view()}, {k2.view()}, {v3.view()}, {o.view()}, lse.view()); },
      "attention: v (1,5,3,8) must be (1,5,2,8) (B,T,Hkv,D)");
  // The unfused oracle is multi-head only: it refuses, naming itself and the head counts.
  try {
    ops::UnfusedAttention unfused(ctx(), {1, 5, 6, 8}, {1, 5, 2, 8});
    FAIL() << "the unfused variant took grouped-query attention";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("unfused variant does not do grouped-query attention: q "
                                         "(1,5,6,8) has 6 heads, k (1,5,2,8) 2"),
              std::string::npos)
        << e.what();
  }
}

// The KV cache with Hkv heads: R new rows in one fused (B, R, (H+2*Hkv)*D) buffer, laid out
// [q heads | k heads | v heads]; the caches (B, rows, Hkv, D). The written rows are the new k
// and v, o is causal grouped-query attention over the first position + R rows.
TEST_F(AttentionGqaTest, CachedAttentionReadsTheGroupsCacheHead) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct CacheCase {
    int64_t b, h, hkv, d, rows, r, position;
  };
  for (const CacheCase c : {CacheCase{2, 6, 2, 24, 17, 3, 9}, CacheCase{1, 4, 1, 7, 300, 1, 280}}) {
    SCOPED_TRACE("H " + std::to_string(c.h) + " Hkv " + std::to_string(c.hkv) + " position " +
                 std::to_string(c.position));
    const int64_t hd = c.h * c.d, kvd = c.hkv * c.d, width = hd + 2 * kvd;
    const Shape cache_shape{c.b, c.rows, c.hkv, c.d};
    const auto k0 = rng.normal(c.b * c.rows * kvd), v0 = rng.normal(c.b * c.rows * kvd);
    const auto qkv = rng.normal(c.b * c.r * width);
    auto kc = upload(ctx(), cache_shape, k0), vc = upload(ctx(), cache_shape, v0);
    auto fused = upload(ctx(), {c.b, c.r, width}, qkv);
    auto o = poisoned(ctx(), {c.b, c.r, c.h, c.d});
    const uint32_t pos = uint32_t(c.position);
    vk::Buffer position = uploadWords(ctx(), std::span(&pos, 1));
    auto part = [&](int64_t first_head, int64_t heads) {
      AttentionTensor t{fused.view(), width};
      t.view.shape = {c.b, c.r, heads, c.d};
      t.view.offset = uint64_t(first_head * c.d) * 4;
      return t;
    };
    const ops::TensorView pv = ops::view(position, {1}, 0, DType::U32);
    vk::Recorder rec(ctx());
    ops::writeKvCache(rec, part(c.h, c.hkv), part(c.h + c.hkv, c.hkv), kc.view(), vc.view(), pv);
    ops::cachedAttention(rec, part(0, c.h), kc.view(), vc.view(), pv, {o.view()});
    rec.submit();

    std::vector<float> k1 = k0, v1 = v0, q;
    for (int64_t b = 0; b < c.b; ++b)
      for (int64_t r = 0; r < c.r; ++r) {
        const auto row = qkv.begin() + ptrdiff_t((b * c.r + r) * width);
        q.insert(q.end(), row, row + hd);
        const auto to = ptrdiff_t((b * c.rows + c.position + r) * kvd);
        std::copy(row + hd, row + hd + kvd, k1.begin() + to);
        std::copy(row + hd + kvd, row + width, v1.begin() + to);
      }
    EXPECT_EQ(download(ctx(), kc), k1) << "k_cache";
    EXPECT_EQ(download(ctx(), vc), v1) << "v_cache";
    const int64_t keys = c.position + c.r;
    ops::ref::AttentionShape s{c.b, c.h, c.r, keys, c.d, /*causal=*/true};
    s.hkv = c.hkv;
    s.k_stride = s.v_stride = kvd;
    std::vector<float> kw, vw, want(q.size()), lse(c.b * c.h * c.r);
    for (int64_t b = 0; b < c.b; ++b) {  // batch b's first `keys` cache rows, densely
      const auto first = ptrdiff_t(b * c.rows * kvd), last = first + ptrdiff_t(keys * kvd);
      kw.insert(kw.end(), k1.begin() + first, k1.begin() + last);
      vw.insert(vw.end(), v1.begin() + first, v1.begin() + last);
    }
    ops::ref::attention(s, q.data(), kw.data(), vw.data(), want.data(), lse.data());
    EXPECT_TRUE(allClose(download(ctx(), o), want, kTolerance)) << "o";
  }
}

TEST_F(AttentionGqaTest, CachedAttentionRefusesCachesThatDoNotDivideTheHeads) {
  auto q = poisoned(ctx(), {1, 1, 6, 8}), o = poisoned(ctx(), {1, 1, 6, 8});
  auto kc = poisoned(ctx(), {1, 5, 4, 8}), vc = poisoned(ctx(), {1, 5, 4, 8});
  auto k2 = poisoned(ctx(), {1, 1, 2, 8});
  const uint32_t zero = 0;
  vk::Buffer position = uploadWords(ctx(), std::span(&zero, 1));
  const ops::TensorView pv = ops::view(position, {1}, 0, DType::U32);
  vk::Recorder rec(ctx());
  expectShapeError(
      rec, [&] { ops::cachedAttention(rec, {q.view()}, kc.view(), vc.view(), pv, {o.view()}); },
      "cachedAttention: rows (1,1,6,8), k_cache (1,5,4,8), v_cache (1,5,4,8): the caches' heads "
      "must divide the queries' heads");
  // writeKvCache copies whole rows: the new keys need the cache's heads exactly.
  expectShapeError(
      rec, [&] { ops::writeKvCache(rec, {k2.view()}, {k2.view()}, kc.view(), vc.view(), pv); },
      "writeKvCache: rows (1,1,2,8), k_cache (1,5,4,8), v_cache (1,5,4,8): the new rows must "
      "have the caches' heads");
}

}  // namespace
}  // namespace vkgrad::test
