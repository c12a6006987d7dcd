// The fragment layer (shaders/common/fragment.glsl) through its check kernel
// (shaders/fragment/check.comp): load and store round trips through the scrambled layout,
// fill, scale, multiply-add and conversion against the CPU, and the coordinate hook. The
// emulated build runs wherever the device has fp16 arithmetic (lavapipe); the native build
// where it has cooperative matrices; a device without either refuses the kernel by name.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::test {
namespace {

struct CheckPush {
  float alpha, fill_h, fill_f;
};

// Two warps: the second's matrices and results sit at their own offsets, so a warp that
// reads or writes another's slice (a virtual warp's lanes mixed up) shows.
constexpr uint32_t kWarps = 2;
constexpr int kResults = 6;

// A 16x16 row-major product of fp16 values with fp32 sums: fp16 x fp16 products are exact in
// fp32, so what is left is the order of sixteen fp32 additions, ~16·2^-24 of their magnitudes.
constexpr double kTolerance = 1e-6;

std::vector<double> mulAdd(const float* a, const float* b, const float* c) {
  std::vector<double> d(256);
  for (int r = 0; r < 16; ++r)
    for (int col = 0; col < 16; ++col) {
      double sum = c ? c[r * 16 + col] : 0.0;
      for (int k = 0; k < 16; ++k) sum += double(a[r * 16 + k]) * b[k * 16 + col];
      d[r * 16 + col] = sum;
    }
  return d;
}

class FragmentTest : public VkTest, public testing::WithParamInterface<bool> {
 protected:
  bool emulated() const { return GetParam(); }
  bool supported() const {
    const vk::DeviceInfo& info = ctx().info();
    return emulated() ? info.fp16 : info.coopmat;
  }
  const vk::Kernel& kernel(bool cm) {
    const uint32_t lanes = emulated() ? 32 : ctx().info().subgroup_size;
    return ctx().kernels().get(
        emulated() ? "fragment/check.emu" : "fragment/check",
        {{"THREADS", kWarps * lanes}, {"LANES", lanes}, {"WARPS", kWarps}, {"CM", cm}});
  }
};

// Every result of the check kernel for both staging orders against the CPU.
TEST_P(FragmentTest, MatchesCpuThroughTheScrambledLayout) {
  if (!supported()) {
    // The kernel declares what it needs; a device without it refuses it by name.
    EXPECT_THROW(kernel(false), Error);
    return;
  }
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t n = kWarps * 256;
  for (const bool cm : {false, true}) {
    SCOPED_TRACE(cm ? "column-major" : "row-major");
    const std::vector<float> a = ops::ref::roundToHalf(rng.uniform(n)),
                             b = ops::ref::roundToHalf(rng.uniform(n)), c = rng.uniform(n),
                             rows = rng.uniform(kWarps * 16);
    const CheckPush push{0.75f, -1.5f, 0.25f};
    DeviceTensor ta = upload(ctx(), {n}, a), tb = upload(ctx(), {n}, b), tc = upload(ctx(), {n}, c),
                 trows = upload(ctx(), {kWarps * 16}, rows),
                 out = poisoned(ctx(), {kWarps * (kResults + 1) * 256});
    {
      const vk::Arg args[] = {ta.buffer, tb.buffer, tc.buffer, trows.buffer, out.buffer};
      vk::Recorder rec(ctx());
      rec.dispatchGroups(kernel(cm), args, &push, sizeof(push), 1);
      rec.submit();
    }
    const std::vector<float> got = download(ctx(), out);
    for (uint32_t w = 0; w < kWarps; ++w) {
      SCOPED_TRACE(testing::Message() << "warp " << w);
      const float *wa = a.data() + w * 256, *wb = b.data() + w * 256, *wc = c.data() + w * 256;
      const std::vector<float> c16 = ops::ref::roundToHalf(std::vector<float>(wc, wc + 256));
      std::vector<std::vector<double>> want(kResults, std::vector<double>(256));
      const std::vector<double> abc = mulAdd(wa, wb, wc), c16b = mulAdd(c16.data(), wb, nullptr);
      const std::vector<float> fill(256, push.fill_h);
      const std::vector<double> fillb = mulAdd(fill.data(), wb, nullptr);
      std::vector<float> a_scaled(256);
      for (int e = 0; e < 256; ++e) a_scaled[e] = ops::ref::roundToHalf(wa[e] * push.alpha);
      const std::vector<double> sab = mulAdd(a_scaled.data(), wb, nullptr);
      for (int e = 0; e < 256; ++e) {
        want[0][e] = double(wc[e]) * rows[w * 16 + e / 16];  // round trip, rows by the hook
        want[1][e] = push.alpha * abc[e];
        want[2][e] = c16b[e];
        want[3][e] = fillb[e] + push.fill_f;
        want[4][e] = sab[e];
        want[5][e] = e;  // 16·row + col
      }
      for (int j = 0; j < kResults; ++j) {
        SCOPED_TRACE(testing::Message() << "result " << j);
        const float* g = got.data() + (w * kResults + j) * 256;
        const std::vector<float> got_j(g, g + 256);
        std::vector<float> want_j(want[j].begin(), want[j].end());
        if (j == 5 || j == 0) {
          // Exact: a coordinate, and a load, store and one product.
          EXPECT_EQ(got_j, want_j);
        } else {
          EXPECT_TRUE(allClose(got_j, want_j, kTolerance));
        }
      }
      // The hook as the lanes hold it: each position once. Emulated, in an order that is
      // neither row-major by lane nor NVIDIA's mma accumulator layout (lane l holding rows
      // l/4 and l/4 + 8, columns 2(l%4) + {0, 1, 8, 9}), so code that guesses either fails.
      const float* raw = got.data() + (kWarps * kResults + w) * 256;
      std::vector<int> seen(256, 0);
      int row_major = 0, nvidia = 0;
      for (int e = 0; e < 256; ++e) {
        const int at = int(raw[e]);
        ASSERT_TRUE(at >= 0 && at < 256 && float(at) == raw[e]) << raw[e];
        ++seen[at];
        const int lane = e / 8, i = e % 8;
        const int nv_row = lane / 4 + 8 * ((i / 2) % 2),
                  nv_col = 2 * (lane % 4) + i % 2 + 8 * (i / 4);
        row_major += at == e;
        nvidia += at == nv_row * 16 + nv_col;
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), 256);
      if (emulated()) {
        EXPECT_LT(row_major, 16);
        EXPECT_LT(nvidia, 16);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Builds, FragmentTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "emulated" : "native");
                         });

}  // namespace
}  // namespace vkgrad::test
