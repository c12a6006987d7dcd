// One full GPT training step on the device (forward, backward and the AdamW update, one
// compiled graph as graph::Trainer builds it) against the CPU reference of the same model
// with the same weights (models/gpt_reference.h): the loss, every parameter's gradient and
// every parameter after the update.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "models/gpt_reference.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/ops/reference/normalised_error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using gpt::GptConfig;
using graph::Graph;
using graph::Tensor;

// Both sides compute the mean of fp32 per-row losses from fp32 logits that agree to a few
// ulps: the difference is ~1e-7 relative, 1e-5 leaves a wide margin.
constexpr double kLossTolerance = 1e-5;
// Normalised by the gradient's largest element (compare.h). Each gradient is the end of
// ~30 fp32 ops (matmuls, attention, LayerNorm and GELU backward, residual sums), each within
// a few ulps (~1e-7) of its operands' scale; LayerNorm's and softmax's backward subtract row
// means, which can cancel a digit or two. 1e-4 is ~1000 ulps: far above that rounding, far
// below any real error (a wrong mask, a missed residual or layout bug gives O(1)). Measured
// on lavapipe over 25 seeds: at most 6.4e-7.
constexpr double kGradTolerance = 1e-4;
// Normalised by the parameter's largest |value| after the step: the update is a few fp32
// ops per element, each rounding at ~6e-8 of |p| or of the step lr.
constexpr double kUpdateTolerance = 1e-6;

class GptReferenceTest : public VkTest {
 protected:
  // Runs one training step of `c` on (batch, t) random ids and targets on both sides and
  // compares everything; prints the worst errors per parameter.
  void checkStep(const GptConfig& c, int64_t batch, int64_t t) {
    SCOPED_TRACE(rng_.describe());
    graph::ParameterStore store(ctx());
    gpt::declareGpt(store, c);
    store.initialize(rng_.seed());
    const std::map<std::string, ops::Shape> shapes = gptReferenceShapes(c);
    ASSERT_EQ(store.all().size(), shapes.size());
    NamedArrays before;
    for (const auto& p : store.all()) {
      ASSERT_TRUE(shapes.count(p->name)) << p->name;
      ASSERT_EQ(p->shape, shapes.at(p->name)) << p->name;
      before[p->name] = download(ctx(), p->view());
    }

    std::vector<uint32_t> ids(size_t(batch * t)), targets(ids.size());
    for (auto& v : ids) v = rng_.below(uint32_t(c.vocab));
    for (auto& v : targets) v = rng_.below(uint32_t(c.vocab));

    graph::OptimizerConfig opt;
    opt.kind = graph::OptimizerConfig::Kind::AdamW;
    opt.lr = 1e-2f;
    opt.adamw.weight_decay = 0.1f;  // on matrices only: checks the decay and its mask

    Graph g;
    const Tensor ids_in = g.input("ids", {batch, t}, ops::DType::U32);
    const Tensor targets_in = g.input("targets", {batch, t}, ops::DType::U32);
    const Tensor loss = gpt::gptLoss(g, store, c, ids_in, targets_in);
    g.markOutput(loss);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::addOptimizer(g, grads, opt);
    graph::Executor exec(ctx(), g);
    exec.setInput(ids_in, ids);
    exec.setInput(targets_in, targets);
    exec.step();

    // The AdamW kernel only reads the gradients (no clipping is configured), so what is
    // read after the step is the gradient the update used.
    const double got_loss = exec.readScalar(loss);
    NamedArrays got_grads, after;
    for (const auto& [param, grad] : grads.parameters)
      got_grads[g.tensor(param).parameter->name] = exec.read(grad);
    ASSERT_EQ(got_grads.size(), shapes.size());
    for (const auto& p : store.all()) after[p->name] = download(ctx(), p->view());

    const GptReferenceStep ref = gptReference(c, before, ids, targets, batch, t);
    const auto want_after = adamwReference(shapes, before, ref.grads, opt);
    const auto own_after = adamwReference(shapes, before, got_grads, opt);

    const double loss_error = std::fabs(got_loss - ref.loss) / std::fabs(ref.loss);
    std::printf("gpt %s-norm %s%s, B=%lld T=%lld: loss %.7f, reference %.7f, rel. error %.2e\n",
                nn::normName(c.norm), ops::activationName(c.activation.kind),
                c.tie_weights ? " tied" : "", static_cast<long long>(batch),
                static_cast<long long>(t), got_loss, ref.loss, loss_error);
    EXPECT_LE(loss_error, kLossTolerance);
    RecordProperty("loss_rel_error", std::to_string(loss_error));

    // Normalised errors per parameter: the gradient against the reference's; the updated
    // parameter against the reference AdamW on the device's gradients (the optimizer alone)
    // and on the reference gradients (end to end, beyond the slack explained below); in
    // parentheses, how many elements' step the gradient's rounding decides.
    std::printf("  %-18s %10s %10s %10s %s\n", "parameter", "grad err", "adamw err", "step err",
                "(sign-ambiguous elements)");
    double worst_grad = 0, worst_step = 0, worst_own = 0;
    for (const auto& [name, shape] : shapes) {
      SCOPED_TRACE(name);
      const std::vector<float>& got_g = got_grads.at(name);
      const std::vector<float>& want_g = ref.grads.at(name);
      const double grad_error = ops::ref::normalisedError(got_g, want_g);
      EXPECT_TRUE(allClose(got_g, want_g, kGradTolerance));

      // The optimizer alone: the reference AdamW on the device's own gradients.
      const std::vector<float> own(own_after.at(name).begin(), own_after.at(name).end());
      const double own_error = ops::ref::normalisedError(after.at(name), own);
      EXPECT_TRUE(allClose(after.at(name), own, kUpdateTolerance));

      // End to end: the reference AdamW on the reference gradients. A first step moves each
      // element by lr * g / (|g| + eps), about lr * sign(g), whose slope eps / (|g| + eps)^2
      // is tiny except near g = 0. So an element whose gradient is off by delta (within the
      // tolerance above) may step differently by at most lr * delta * eps / (|g| - delta +
      // eps)^2, and by at most 2 lr: nothing where |g| >> delta, but a gradient that is
      // rounding noise (e.g. the key bias: softmax ignores a constant added to every score of
      // a row, so its exact gradient is 0) may step either way. Those are counted and allowed
      // that slack; every other element must match to the update's own rounding.
      const std::vector<double>& want_p = want_after.at(name);
      const std::vector<float>& got_p = after.at(name);
      double scale = 1e-30;
      for (double p : want_p) scale = std::max(scale, std::fabs(p));
      const double lr = opt.lr, eps = opt.adamw.eps;
      double step_error = 0;  // beyond the slack, the part the gradients cannot explain
      int ambiguous = 0;
      for (size_t i = 0; i < got_p.size(); ++i) {
        const double delta = std::fabs(double(got_g[i]) - double(want_g[i]));
        const double room = std::max(std::fabs(double(want_g[i])) - delta, 0.0) + eps;
        const double slack = lr * std::min(2.0, delta * eps / (room * room));
        const double err = std::fabs(double(got_p[i]) - want_p[i]);
        if (slack > kUpdateTolerance * scale) ++ambiguous;
        step_error = std::max(step_error, (err - slack) / scale);
      }
      EXPECT_LE(step_error, kUpdateTolerance);

      std::printf("  %-18s %10.2e %10.2e %10.2e", name.c_str(), grad_error, own_error, step_error);
      if (ambiguous) std::printf(" (%d)", ambiguous);
      std::printf("\n");
      worst_grad = std::max(worst_grad, grad_error);
      worst_own = std::max(worst_own, own_error);
      worst_step = std::max(worst_step, step_error);
    }
    RecordProperty("worst_grad_error", std::to_string(worst_grad));
    RecordProperty("worst_adamw_error", std::to_string(worst_own));
    RecordProperty("worst_step_error", std::to_string(worst_step));

    // Position rows past the window take no part: their gradient is exactly 0 and their
    // update is the weight decay alone.
    const std::vector<float>& dpos = got_grads.at("emb.pos");
    for (int64_t i = t * c.width; i < c.context * c.width; ++i)
      ASSERT_EQ(dpos[size_t(i)], 0.0f) << "emb.pos row " << i / c.width << " of T = " << t;
  }

  Rng rng_;
};

// Two pre-norm GELU blocks with an untied head; T = 9 < context 11, so positions 9 and 10
// are unused.
TEST_F(GptReferenceTest, PreNormGeluUntiedStepMatchesReference) {
  GptConfig c;
  c.vocab = 13;
  c.layers = 2;
  c.heads = 2;
  c.width = 16;
  c.context = 11;
  c.norm = nn::Norm::Pre;
  c.activation = nn::ActivationSpec::gelu();
  c.tie_weights = false;
  checkStep(c, /*batch=*/3, /*t=*/9);
}

// One post-norm LeakyReLU block (no final norm), the head tied to the token table, so emb.tok
// gets the sum of the head's and the lookup's gradients; the window fills the context.
TEST_F(GptReferenceTest, PostNormLeakyReluTiedStepMatchesReference) {
  GptConfig c;
  c.vocab = 11;
  c.layers = 1;
  c.heads = 4;
  c.width = 20;
  c.context = 7;
  c.norm = nn::Norm::Post;
  c.activation = nn::ActivationSpec::leakyRelu(0.1f);
  c.tie_weights = true;
  checkStep(c, /*batch=*/2, /*t=*/7);
}

}  // namespace
}  // namespace vkgrad::test
