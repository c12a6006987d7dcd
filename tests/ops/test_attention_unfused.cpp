#include "vkgrad/ops/attention_unfused.h"

#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/reference/attention.h"

namespace vkgrad::test {
namespace {

using ops::Shape;

class UnfusedAttentionTest : public VkTest {};

// The op-library path against the fp64 reference, and flash attention against it on the
// device: the two implementations agree, causal or not, with Tq != Tk.
TEST_F(UnfusedAttentionTest, MatchesReferenceAndFlash) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  struct Case {
    int64_t b, h, tq, tk, d;
    bool causal;
  };
  for (const Case c : {Case{2, 3, 17, 17, 16, true}, Case{1, 2, 9, 33, 8, false},
                       Case{1, 2, 40, 9, 16, true}}) {
    SCOPED_TRACE(testing::Message() << "Tq " << c.tq << " Tk " << c.tk << " causal " << c.causal);
    const Shape sq{c.b, c.tq, c.h, c.d}, sk{c.b, c.tk, c.h, c.d};
    const auto q = rng.normal(sq.numel()), k = rng.normal(sk.numel()), v = rng.normal(sk.numel()),
               dout = rng.normal(sq.numel());
    std::vector<float> o(sq.numel()), lse(c.b * c.h * c.tq), dq(sq.numel()), dk(sk.numel()),
        dv(sk.numel());
    const ops::ref::AttentionShape rs{c.b, c.h, c.tq, c.tk, c.d, c.causal};
    ops::ref::attention(rs, q.data(), k.data(), v.data(), o.data(), lse.data());
    ops::ref::attentionBackward(rs, q.data(), k.data(), v.data(), dout.data(), dq.data(),
                                dk.data(), dv.data());
    auto tq = upload(ctx(), sq, q), tk = upload(ctx(), sk, k), tv = upload(ctx(), sk, v),
         tdout = upload(ctx(), sq, dout);
    auto to = poisoned(ctx(), sq), tdq = poisoned(ctx(), sq), tdk = poisoned(ctx(), sk),
         tdv = poisoned(ctx(), sk);
    auto fo = poisoned(ctx(), sq), flse = poisoned(ctx(), {c.b, c.h, c.tq});
    const ops::AttentionOptions options{c.causal};
    ops::UnfusedAttention unfused(ctx(), sq, sk, options);
    vk::Recorder rec(ctx());
    unfused.forward(rec, tq.view(), tk.view(), tv.view(), to.view());
    unfused.backward(rec, tdout.view(), tdq.view(), tdk.view(), tdv.view());
    ops::attention(rec, {tq.view()}, {tk.view()}, {tv.view()}, {fo.view()}, flse.view(), options);
    rec.submit();
    constexpr double kTolerance = 2e-5;
    const auto got_o = download(ctx(), to);
    EXPECT_TRUE(allClose(got_o, o, kTolerance)) << "o";
    EXPECT_TRUE(allClose(download(ctx(), fo), got_o, kTolerance)) << "flash vs unfused";
    const double scale = [&] {
      double m = 0;
      for (float x : dv) m = std::max(m, double(std::fabs(x)));
      return m;
    }();
    EXPECT_TRUE(allClose(download(ctx(), tdv), dv, kTolerance)) << "dv";
    EXPECT_TRUE(allCloseOnScale(download(ctx(), tdq), dq, scale, kTolerance)) << "dq";
    EXPECT_TRUE(allCloseOnScale(download(ctx(), tdk), dk, scale, kTolerance)) << "dk";
  }
}

}  // namespace
}  // namespace vkgrad::test
