#include "vkgrad/training/autograd.h"

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/gradcheck.h"
#include "common/graph_gradcheck.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::OpKind;
using graph::Tensor;
using ops::Write;

class AutogradTest : public VkTest {
 protected:
  // Composite graphs are checked end to end: the loss the executor computes, perturbed one
  // parameter coordinate at a time, against the gradients the backward nodes wrote
  // (common/graph_gradcheck.h).
  void checkAllParameters(graph::ParameterStore& store, Graph& g, Tensor loss,
                          const graph::Gradients& grads, graph::Executor& exec,
                          const GradCheckOptions& options) {
    EXPECT_TRUE(checkParameterGradients(
        ctx(), store, g, grads, exec, [&] { return double(exec.readScalar(loss)); }, rng_, options))
        << rng_.describe();
  }

  // One step of two forms of the same model on the same inputs (x, y): the same loss bits.
  struct Form {
    graph::Executor& exec;
    Tensor x, y, loss;
  };
  static void expectTheSameLoss(const Form& a, const Form& b, const std::vector<float>& xs,
                                const std::vector<uint32_t>& ys) {
    for (const Form* f : {&a, &b}) {
      f->exec.setInput(f->x, xs);
      f->exec.setInput(f->y, ys);
      f->exec.step();
    }
    const float la = a.exec.readScalar(a.loss), lb = b.exec.readScalar(b.loss);
    EXPECT_EQ(std::memcmp(&la, &lb, 4), 0) << la << " vs " << lb;
  }

  // The two-layer MLP of the fused-activation tests: x (.., 5) -> 7 hidden -> 3 classes.
  struct Mlp {
    const graph::Parameter &w1, &b1, &w2, &b2;
  };
  Mlp addMlp(graph::ParameterStore& store) {
    const Mlp mlp{store.add("w1", {5, 7}, Init::xavierUniform()),
                  store.add("b1", {7}, Init::uniform(-0.5f, 0.5f)),
                  store.add("w2", {7, 3}, Init::xavierUniform()),
                  store.add("b2", {3}, Init::uniform(-0.5f, 0.5f))};
    store.initialize(rng_.seed());
    return mlp;
  }

  Rng rng_;
};

// An MLP's hidden activation (the GELUs: derivatives that read x, smooth for finite
// differences) read by one matmul only: that matmul's a-gradient node writes the gradient of
// the activation's input itself (f' in its epilogue, runtime/ops/fused_activation.h), so no
// ActivationBackward is recorded and the hidden output has no gradient of its own. Where the hidden
// output is read twice the activation keeps its own node. Every parameter against finite
// differences, both ways.
TEST_F(AutogradTest, AnActivationReadOnceIsFusedIntoTheNextMatmulsBackward) {
  for (ops::Activation kind : {ops::Activation::GeluTanh, ops::Activation::GeluErf})
    for (bool read_twice : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << ops::activationName(kind) << (read_twice ? ", read twice" : ", read once"));
      graph::ParameterStore store(ctx());
      const Mlp mlp = addMlp(store);
      Graph g;
      const Tensor x = g.input("x", {2, 3, 5});
      const Tensor y = g.input("y", {6}, ops::DType::U32);
      const Tensor pre = g.matmul(x, g.parameter(mlp.w1), g.parameter(mlp.b1));
      const Tensor h = g.activation(pre, kind, 0.2f);
      const Tensor W2 = g.parameter(mlp.w2);
      Tensor out = g.matmul(h, W2, g.parameter(mlp.b2));
      if (read_twice) out = g.add(out, g.matmul(h, W2));
      const Tensor loss = g.crossEntropy(g.reshape(out, {6, 3}), y);
      g.markOutput(loss);
      const graph::Gradients grads = graph::backward(g, loss);
      int activation_backward = 0, fused = 0;
      for (const auto& node : g.nodes()) {
        activation_backward += node.op == OpKind::ActivationBackward;
        fused += node.op == OpKind::MatmulBackward && node.inputs.at(3) >= 0;
      }
      EXPECT_EQ(activation_backward, read_twice ? 1 : 0);
      EXPECT_EQ(fused, read_twice ? 0 : 1);
      if (read_twice)
        EXPECT_NO_THROW(grads[h]);
      else
        EXPECT_THROW(grads[h], Error);
      EXPECT_NO_THROW(grads[pre]);

      graph::Executor exec(ctx(), g);
      exec.setInput(x, rng_.normal(30));
      exec.setInput(y, rng_.below(6, 3));
      checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
    }
}

// A residual joined to its matmul (Graph::matmulAdd): no Add node; the same loss bits as
// matmul + add; the residual's gradient is the sum's, adopted where nothing else reads the
// residual and copied (one AddBackward) where something does; every parameter against finite
// differences, both ways.
TEST_F(AutogradTest, AResidualJoinsItsMatmulAndTakesTheSumsGradient) {
  for (bool read_twice : {false, true}) {
    SCOPED_TRACE(read_twice ? "residual read twice" : "residual read once");
    graph::ParameterStore store(ctx());
    const auto& wr = store.add("wr", {5, 6}, Init::xavierUniform());
    const graph::Parameter* wa =
        read_twice ? nullptr : &store.add("wa", {5, 6}, Init::xavierUniform());
    const auto& w1 = store.add("w1", {6, 7}, Init::xavierUniform());
    const auto& b1 = store.add("b1", {7}, Init::uniform(-0.5f, 0.5f));
    const auto& w2 = store.add("w2", {7, 6}, Init::xavierUniform());
    const auto& b2 = store.add("b2", {6}, Init::uniform(-0.5f, 0.5f));
    const auto& wo = store.add("wo", {6, 3}, Init::xavierUniform());
    store.initialize(rng_.seed());
    const std::vector<float> xs = rng_.normal(30);
    const std::vector<uint32_t> ys = rng_.below(6, 3);
    // joined: the residual in the matmul's node; else an add after it.
    auto build = [&](Graph& g, bool joined, Tensor& loss, Tensor& r) {
      const Tensor x = g.input("x", {2, 3, 5});
      const Tensor y = g.input("y", {6}, ops::DType::U32);
      r = g.matmul(x, g.parameter(wr));
      const Tensor a = read_twice ? r : g.matmul(x, g.parameter(*wa));
      const Tensor h =
          g.activation(g.matmul(a, g.parameter(w1), g.parameter(b1)), ops::Activation::Tanh);
      const Tensor W2 = g.parameter(w2), B2 = g.parameter(b2);
      const Tensor out = joined ? g.matmulAdd(h, W2, B2, r) : g.add(r, g.matmul(h, W2, B2));
      loss = g.crossEntropy(g.reshape(g.matmul(out, g.parameter(wo)), {6, 3}), y);
      g.markOutput(loss);
      return std::pair{x, y};
    };
    Graph g, plain;
    Tensor loss, r, plain_loss, plain_r;
    const auto [x, y] = build(g, true, loss, r);
    const auto [px, py] = build(plain, false, plain_loss, plain_r);
    const graph::Gradients grads = graph::backward(g, loss);
    graph::backward(plain, plain_loss);
    int adds = 0, add_backwards = 0;
    for (const auto& node : g.nodes()) {
      adds += node.op == OpKind::Add;
      add_backwards += node.op == OpKind::AddBackward;
    }
    EXPECT_EQ(adds, 0);
    EXPECT_EQ(add_backwards, read_twice ? 1 : 0);
    EXPECT_NO_THROW(grads[r]);

    graph::Executor exec(ctx(), g), plain_exec(ctx(), plain);
    expectTheSameLoss({exec, x, y, loss}, {plain_exec, px, py, plain_loss}, xs, ys);
    checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
  }
}

// An activation applied by its matmul (Graph::matmulActivation): one node where the two-node
// form has two, the same loss and parameter-gradient bits, and the same backward: GELU's
// derivative (reads x) fused into the next matmul's backward where the hidden output is read
// once, else f's backward from the matmul's own rule (tanh's reads y); every parameter
// against finite differences.
TEST_F(AutogradTest, AnAppliedActivationHasTheTwoNodeFormsBitsAndGradients) {
  for (ops::Activation kind : {ops::Activation::GeluTanh, ops::Activation::Tanh})
    for (bool read_twice : {false, true}) {
      SCOPED_TRACE(testing::Message()
                   << ops::activationName(kind) << (read_twice ? ", read twice" : ", read once"));
      graph::ParameterStore store(ctx());
      const Mlp mlp = addMlp(store);
      const std::vector<float> xs = rng_.normal(30);
      const std::vector<uint32_t> ys = rng_.below(6, 3);
      auto build = [&](Graph& g, bool applied, Tensor& loss) {
        const Tensor x = g.input("x", {2, 3, 5});
        const Tensor y = g.input("y", {6}, ops::DType::U32);
        const Tensor W1 = g.parameter(mlp.w1), B1 = g.parameter(mlp.b1);
        const Tensor h = applied ? g.matmulActivation(x, W1, B1, kind, 0.2f)
                                 : g.activation(g.matmul(x, W1, B1), kind, 0.2f);
        const Tensor W2 = g.parameter(mlp.w2);
        Tensor out = g.matmul(h, W2, g.parameter(mlp.b2));
        if (read_twice) out = g.add(out, g.matmul(h, W2));
        loss = g.crossEntropy(g.reshape(out, {6, 3}), y);
        g.markOutput(loss);
        return std::pair{x, y};
      };
      Graph g, plain;
      Tensor loss, plain_loss;
      const auto [x, y] = build(g, true, loss);
      const auto [px, py] = build(plain, false, plain_loss);
      const graph::Gradients grads = graph::backward(g, loss);
      const graph::Gradients plain_grads = graph::backward(plain, plain_loss);
      const bool fused = kind == ops::Activation::GeluTanh && !read_twice;
      int activations = 0, activation_backward = 0, fusions = 0;
      for (const auto& node : g.nodes()) {
        activations += node.op == OpKind::Activation;
        activation_backward += node.op == OpKind::ActivationBackward;
        fusions += node.op == OpKind::MatmulBackward && node.inputs.at(3) >= 0;
      }
      EXPECT_EQ(activations, 0);
      EXPECT_EQ(activation_backward, fused ? 0 : 1);
      EXPECT_EQ(fusions, fused ? 1 : 0);

      graph::Executor exec(ctx(), g), plain_exec(ctx(), plain);
      expectTheSameLoss({exec, x, y, loss}, {plain_exec, px, py, plain_loss}, xs, ys);
      ASSERT_EQ(grads.parameters.size(), plain_grads.parameters.size());
      for (size_t i = 0; i < grads.parameters.size(); ++i) {
        const std::vector<float> got = exec.read(grads.parameters[i].second),
                                 want = plain_exec.read(plain_grads.parameters[i].second);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "parameter " << i;
      }
      checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
    }
}

// Without a backward (inference) the applied activation gives the two-node form's output bits;
// its pre output, which nothing reads then, is still written (a short-lived arena tensor).
TEST_F(AutogradTest, AnAppliedActivationWithoutABackwardGivesTheTwoNodeFormsOutput) {
  graph::ParameterStore store(ctx());
  const Mlp mlp = addMlp(store);
  const std::vector<float> xs = rng_.normal(30);
  for (ops::Activation kind : {ops::Activation::GeluTanh, ops::Activation::Sigmoid}) {
    SCOPED_TRACE(ops::activationName(kind));
    std::vector<float> outs[2];
    for (bool applied : {false, true}) {
      Graph g;
      const Tensor x = g.input("x", {2, 3, 5});
      const Tensor W1 = g.parameter(mlp.w1), B1 = g.parameter(mlp.b1);
      const Tensor h = applied ? g.matmulActivation(x, W1, B1, kind)
                               : g.activation(g.matmul(x, W1, B1), kind);
      g.markOutput(h);
      graph::Executor exec(ctx(), g);
      exec.setInput(x, xs);
      exec.step();
      outs[applied] = exec.read(h);
    }
    ASSERT_EQ(outs[0].size(), 42u);
    ASSERT_EQ(outs[1].size(), outs[0].size());
    EXPECT_EQ(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * 4), 0);
  }
}

// Where no kernel takes the sum's gradient as an addend, Backward::addLater still copies it:
// before the rule that reads it (h, whose other reader is off the loss's path) and at the end
// (a parameter used as the residual). Finite differences agree.
TEST_F(AutogradTest, AnAddLeftForLaterIsCopiedWhereNoKernelTakesIt) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {5, 4}, Init::xavierUniform());
  const auto& w2 = store.add("w2", {5, 4}, Init::xavierUniform());
  const auto& w3 = store.add("w3", {4, 4}, Init::xavierUniform());
  const auto& p = store.add("p", {3, 4}, Init::uniform(-0.5f, 0.5f));
  const auto& wo = store.add("wo", {4, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());
  Graph g;
  const Tensor x = g.input("x", {3, 5});
  const Tensor y = g.input("y", {3}, ops::DType::U32);
  const Tensor h = g.matmul(x, g.parameter(w));
  g.relu(h);  // a second reader of h, off the loss's path
  const Tensor out = g.matmulAdd(x, g.parameter(w2), {}, h);
  const Tensor out2 =
      g.matmulAdd(g.activation(out, ops::Activation::Tanh), g.parameter(w3), {}, g.parameter(p));
  const Tensor loss = g.crossEntropy(g.matmul(out2, g.parameter(wo)), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int add_backward = 0;
  for (const auto& node : g.nodes()) add_backward += node.op == OpKind::AddBackward;
  EXPECT_EQ(add_backward, 2);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(15));
  exec.setInput(y, rng_.below(3, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// x -> tanh(x W1 + b1) -> tanh(h W + b2) -> (h2 W) -> W3 -> cross-entropy: W is used twice.
TEST_F(AutogradTest, MlpWithAWeightUsedTwiceMatchesFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& w1 = store.add("w1", {4, 6}, Init::xavierUniform());
  const auto& b1 = store.add("b1", {6}, Init::uniform(-0.5f, 0.5f));
  const auto& w = store.add("w", {6, 6}, Init::xavierUniform());
  const auto& b2 = store.add("b2", {6}, Init::uniform(-0.5f, 0.5f));
  const auto& w3 = store.add("w3", {6, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());

  Graph g;
  const Tensor x = g.input("x", {5, 4});
  const Tensor y = g.input("y", {5}, ops::DType::U32);
  const Tensor W = g.parameter(w);
  const Tensor h1 =
      g.activation(g.matmul(x, g.parameter(w1), g.parameter(b1)), ops::Activation::Tanh);
  const Tensor h2 = g.activation(g.matmul(h1, W, g.parameter(b2)), ops::Activation::Tanh);
  const Tensor logits = g.matmul(g.matmul(h2, W), g.parameter(w3));
  const Tensor loss = g.crossEntropy(logits, y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);

  // W's two contributions: the first (in execution order) writes, the second adds.
  std::vector<Write> modes;
  for (const auto& node : g.nodes())
    if (node.op == OpKind::MatmulBackward && node.outputs[0] == grads[W].id)
      modes.push_back(node.writes[0]);
  EXPECT_EQ(modes, (std::vector<Write>{Write::Overwrite, Write::Accumulate}));

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(20));
  exec.setInput(y, rng_.below(5, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// A pre-norm residual block: h = layerNorm(x W0 + b0); r = h + gelu(h W1 + b1); logits =
// r W2, reshaped to (2,3,C) for a 3-D cross-entropy. h feeds both the residual and the MLP,
// and the reshape's gradient is a view of its source's.
TEST_F(AutogradTest, ResidualLayerNormBlockMatchesFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& w0 = store.add("w0", {5, 8}, Init::xavierUniform());
  const auto& b0 = store.add("b0", {8}, Init::uniform(-0.5f, 0.5f));
  const auto& gamma = store.add("gamma", {8}, Init::uniform(0.5f, 1.5f));
  const auto& beta = store.add("beta", {8}, Init::uniform(-0.5f, 0.5f));
  const auto& w1 = store.add("w1", {8, 8}, Init::xavierUniform());
  const auto& b1 = store.add("b1", {8}, Init::uniform(-0.5f, 0.5f));
  const auto& w2 = store.add("w2", {8, 4}, Init::xavierUniform());
  store.initialize(rng_.seed() + 1);

  Graph g;
  const Tensor x = g.input("x", {6, 5});
  const Tensor y = g.input("y", {2, 3}, ops::DType::U32);
  const Tensor h = g.layerNorm(g.matmul(x, g.parameter(w0), g.parameter(b0)), g.parameter(gamma),
                               g.parameter(beta));
  const Tensor mlp = g.gelu(g.matmul(h, g.parameter(w1), g.parameter(b1)));
  const Tensor r = g.add(h, mlp);
  const Tensor logits = g.reshape(g.matmul(r, g.parameter(w2)), {2, 3, 4});
  const Tensor loss = g.crossEntropy(logits, y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  EXPECT_EQ(grads.parameters.size(), 7u);

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(30));
  exec.setInput(y, rng_.below(6, 4));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// Batched activations (B,T,C) against shared weights, a positional table (T,C) broadcast over
// the batch and a per-channel offset (C) broadcast over every row, then a reshape to rows:
// the broadcast operands' gradients are sums over the axes they were repeated along.
TEST_F(AutogradTest, BroadcastAddsAndBatchedMatmulMatchFiniteDifferences) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {5, 6}, Init::xavierUniform());
  const auto& pos = store.add("pos", {4, 6}, Init::uniform(-0.5f, 0.5f));
  const auto& shift = store.add("shift", {6}, Init::uniform(-0.5f, 0.5f));
  const auto& head = store.add("head", {3, 6}, Init::xavierUniform());  // used transposed
  store.initialize(rng_.seed() + 3);

  Graph g;
  const Tensor x = g.input("x", {3, 4, 5});
  const Tensor y = g.input("y", {12}, ops::DType::U32);
  const Tensor h = g.add(g.parameter(shift), g.add(g.matmul(x, g.parameter(w)), g.parameter(pos)));
  const Tensor rows = g.reshape(g.activation(h, ops::Activation::Tanh), {12, 6});
  const Tensor loss = g.crossEntropy(g.matmul(rows, g.parameter(head), {}, false, true), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(60));
  exec.setInput(y, rng_.below(12, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// gamma and beta shared by two layernorms: the later layerNorm (first in the backward) writes
// their gradients, the earlier one must add to them while it writes its dx: one node each,
// dx and the parameters under their own write modes.
// A weight gradient over a long K (3001 rows) gets split-K scratch (ops/matmul.h) sized by
// matmulBackwardScratch, a short one none; the gradients match finite differences (on
// lavapipe the texel kernel runs and leaves the scratch unused; a GPU's Vector kernel splits).
TEST_F(AutogradTest, LongWeightGradientsGetSplitKScratch) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {8, 5}, Init::xavierUniform());
  const auto& b = store.add("b", {5}, Init::uniform(-0.5f, 0.5f));
  const auto& v = store.add("v", {5, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());
  Graph g;
  const Tensor x = g.input("x", {3001, 8});
  const Tensor y = g.input("y", {7}, ops::DType::U32);
  const Tensor W = g.parameter(w), V = g.parameter(v);
  const Tensor h = g.activation(g.matmul(x, W, g.parameter(b)), ops::Activation::Tanh);
  const Tensor few = g.slice(h, 0, 7);  // 7 rows: V's gradient has a short K
  const Tensor loss = g.crossEntropy(g.matmul(few, V), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int with = 0, without = 0;
  for (const auto& node : g.nodes()) {
    if (node.op != OpKind::MatmulBackward) continue;
    ASSERT_EQ(node.outputs.size(), 3u);
    if (node.outputs[0] == grads[W].id) {
      ASSERT_GE(node.outputs[1], 0);
      EXPECT_EQ(g.tensor(node.outputs[1]).shape.numel(),
                ops::matmulBackwardScratch({3001, 8}, {8, 5}, false, false, false));
      ++with;
    } else {
      EXPECT_EQ(node.outputs[1], -1);
      ++without;
    }
  }
  EXPECT_EQ(with, 1);
  EXPECT_GE(without, 1);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(3001 * 8));
  exec.setInput(y, rng_.below(7, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// r = a + h where h is used only by the add: h's gradient is r's gradient itself (no copy
// node), while a, used twice, gets its own (one AddBackward); the gradients still match
// finite differences.
TEST_F(AutogradTest, AResidualBranchAdoptsTheSumsGradient) {
  graph::ParameterStore store(ctx());
  const auto& w0 = store.add("w0", {4, 6}, Init::xavierUniform());
  const auto& w1 = store.add("w1", {6, 6}, Init::xavierUniform());
  const auto& w2 = store.add("w2", {6, 3}, Init::xavierUniform());
  store.initialize(rng_.seed());
  Graph g;
  const Tensor x = g.input("x", {5, 4});
  const Tensor y = g.input("y", {5}, ops::DType::U32);
  const Tensor a = g.activation(g.matmul(x, g.parameter(w0)), ops::Activation::Tanh);
  const Tensor h = g.matmul(a, g.parameter(w1));
  const Tensor r = g.add(a, h);
  const Tensor loss = g.crossEntropy(g.matmul(r, g.parameter(w2)), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  EXPECT_EQ(grads[h].id, grads[r].id);
  EXPECT_NE(grads[a].id, grads[r].id);
  int adds = 0;
  for (const auto& node : g.nodes()) adds += node.op == OpKind::AddBackward;
  EXPECT_EQ(adds, 1);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(20));
  exec.setInput(y, rng_.below(5, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

TEST_F(AutogradTest, SharedLayerNormParametersAccumulate) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {4, 6}, Init::xavierUniform());
  const auto& gamma = store.add("gamma", {6}, Init::uniform(0.5f, 1.5f));
  const auto& beta = store.add("beta", {6}, Init::uniform(-0.5f, 0.5f));
  const auto& w2 = store.add("w2", {6, 3}, Init::xavierUniform());
  store.initialize(rng_.seed() + 2);

  Graph g;
  const Tensor x = g.input("x", {4, 4});
  const Tensor y = g.input("y", {4}, ops::DType::U32);
  const Tensor G = g.parameter(gamma), B = g.parameter(beta);
  const Tensor a = g.layerNorm(g.matmul(x, g.parameter(w)), G, B);
  const Tensor b = g.layerNorm(g.activation(a, ops::Activation::Tanh), G, B);
  const Tensor loss = g.crossEntropy(g.matmul(b, g.parameter(w2)), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int layernorm_backward = 0;
  for (const auto& node : g.nodes()) layernorm_backward += node.op == OpKind::LayerNormBackward;
  EXPECT_EQ(layernorm_backward, 2);

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(16));
  exec.setInput(y, rng_.below(4, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// A residual stream, h + layerNorm(h) as in a transformer block: h's gradient is the sum's
// plus the layerNorm's dx, and the layerNorm's backward kernel adds the sum's gradient itself
// (Backward::addLater, takeAddend): dx written with that addend, no AddBackward copy, dgamma
// and dbeta written by the same node; finite differences agree.
TEST_F(AutogradTest, ResidualLayerNormAddsTheSumsGradientInItsOwnKernel) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {5, 6}, Init::xavierUniform());
  const auto& gamma = store.add("gamma", {6}, Init::uniform(0.5f, 1.5f));
  const auto& beta = store.add("beta", {6}, Init::uniform(-0.5f, 0.5f));
  const auto& w2 = store.add("w2", {6, 3}, Init::xavierUniform());
  store.initialize(rng_.seed() + 3);

  Graph g;
  const Tensor x = g.input("x", {7, 5});
  const Tensor y = g.input("y", {7}, ops::DType::U32);
  const Tensor h = g.matmul(x, g.parameter(w));
  const Tensor r = g.add(h, g.layerNorm(h, g.parameter(gamma), g.parameter(beta)));
  const Tensor loss =
      g.crossEntropy(g.matmul(g.activation(r, ops::Activation::Tanh), g.parameter(w2)), y);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  int layernorm_backward = 0, add_backward = 0;
  for (const auto& node : g.nodes()) {
    add_backward += node.op == OpKind::AddBackward;
    if (node.op != OpKind::LayerNormBackward) continue;
    ++layernorm_backward;
    EXPECT_EQ(node.writes[0], ops::Write::Overwrite);  // dx = its own part + the addend
    EXPECT_EQ(node.writes[1], ops::Write::Overwrite);  // dgamma
    EXPECT_EQ(node.inputs.at(5), grads[r].id);         // the addend: the sum's gradient
  }
  EXPECT_EQ(layernorm_backward, 1);
  EXPECT_EQ(add_backward, 0);

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(35));
  exec.setInput(y, rng_.below(7, 3));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
}

// Only what leads from a parameter to the loss is differentiated: no gradient for inputs,
// targets or a branch the loss does not use, and no backward node for them.
TEST_F(AutogradTest, PrunesWhatDoesNotLeadFromAParameterToTheLoss) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {3, 2}, Init::xavierUniform());
  const auto& unused = store.add("unused", {3, 3}, Init::xavierUniform());
  Graph g;
  const Tensor x = g.input("x", {4, 3});
  const Tensor y = g.input("y", {4}, ops::DType::U32);
  const Tensor side = g.relu(g.matmul(x, g.parameter(unused)));  // not on the loss's path
  const Tensor pre = g.relu(x);  // on the path, but no parameter before it
  const Tensor W = g.parameter(w);
  const Tensor loss = g.crossEntropy(g.matmul(pre, W), y);
  const size_t forward_nodes = g.nodes().size();
  const graph::Gradients grads = graph::backward(g, loss);
  ASSERT_EQ(grads.parameters.size(), 1u);
  EXPECT_EQ(grads.parameters[0].first, W);
  for (Tensor t : {x, y, side, pre}) EXPECT_THROW(grads[t], Error) << t.id;
  // Backward: crossEntropy -> dlogits, matmul -> dW. Nothing for relu or the side branch.
  std::vector<OpKind> ops;
  for (size_t n = forward_nodes; n < g.nodes().size(); ++n) ops.push_back(g.nodes()[n].op);
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::CrossEntropyBackward, OpKind::MatmulBackward}));
}

// A gather from data (an input table here; datasets likewise) passes no gradient: only w is
// trained and no scatter-add is recorded. (Trainable tables: test_attention_graph.cpp.)
TEST_F(AutogradTest, GatherFromDataPassesNoGradientToItsTable) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {3, 2}, Init::xavierUniform());
  Graph g;
  const Tensor table = g.input("table", {5, 3});
  const Tensor rows = g.gather(table, g.input("ids", {4}, ops::DType::U32));
  const Tensor loss =
      g.crossEntropy(g.matmul(rows, g.parameter(w)), g.input("y", {4}, ops::DType::U32));
  const graph::Gradients grads = graph::backward(g, loss);
  ASSERT_EQ(grads.parameters.size(), 1u);
  EXPECT_THROW(grads[table], Error);
  for (const auto& node : g.nodes()) EXPECT_NE(node.op, OpKind::GatherBackward);
}

TEST_F(AutogradTest, RejectsALossThatIsNotAScalarOrNotReachedByAParameter) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {3, 2}, Init::xavierUniform());
  Graph g;
  const Tensor x = g.input("x", {4, 3});
  const Tensor h = g.matmul(x, g.parameter(w));
  EXPECT_THROW(graph::backward(g, h), Error);
  Graph g2;
  const Tensor x2 = g2.input("x", {4, 3});
  const Tensor loss = g2.crossEntropy(x2, g2.input("y", {4}, ops::DType::U32));
  try {
    graph::backward(g2, loss);
    FAIL() << "no parameter reaches the loss";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no parameter"), std::string::npos) << e.what();
  }
}

// Slices of a parameter and of an activation: each slice's gradient is a view of its
// source's, which is zeroed first because the slices do not cover it (W's row 3, h's rows 0
// and 4), and every contribution adds.
TEST_F(AutogradTest, SlicesMatchFiniteDifferencesAndLeaveUnusedRowsZero) {
  graph::ParameterStore store(ctx());
  const auto& w = store.add("w", {6, 4}, Init::xavierUniform());
  const auto& v = store.add("v", {4, 4}, Init::xavierUniform());
  store.initialize(rng_.seed());
  Graph g;
  const Tensor x = g.input("x", {5, 3}), u = g.input("u", {3, 2});
  const Tensor y = g.input("y", {3}, ops::DType::U32);
  const Tensor W = g.parameter(w);
  const Tensor h = g.activation(g.matmul(x, g.slice(W, 0, 3)), ops::Activation::Tanh);  // (5,4)
  const Tensor logits =
      g.add(g.matmul(g.slice(h, 1, 4), g.parameter(v)), g.matmul(u, g.slice(W, 4, 6)));
  const Tensor loss = g.crossEntropy(logits, y);
  g.markOutput(loss);
  const size_t forward_nodes = g.nodes().size();
  const graph::Gradients grads = graph::backward(g, loss);
  int zero_fills = 0;
  for (size_t n = forward_nodes; n < g.nodes().size(); ++n)
    zero_fills += g.nodes()[n].op == OpKind::ZeroFill;
  EXPECT_EQ(zero_fills, 2);  // W's gradient and h's
  for (const auto& node : g.nodes()) {
    if (node.op == OpKind::MatmulBackward && g.tensor(node.outputs[0]).root == grads[W].id) {
      EXPECT_EQ(node.writes[0], Write::Accumulate);
    }
  }

  graph::Executor exec(ctx(), g);
  exec.setInput(x, rng_.normal(15));
  exec.setInput(u, rng_.normal(6));
  exec.setInput(y, rng_.below(3, 4));
  checkAllParameters(store, g, loss, grads, exec, lossGradCheckOptions());
  exec.step();
  const std::vector<float> dw = exec.read(grads[W]);
  for (size_t k = 0; k < 4; ++k) EXPECT_EQ(dw[3 * 4 + k], 0.0f) << k;
  for (size_t k = 0; k < 4; ++k) EXPECT_NE(dw[k], 0.0f) << k;
}

}  // namespace
}  // namespace vkgrad::test
