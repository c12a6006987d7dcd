// vkgrad-bench folds: what the graph folds into the matmul saves, at the shapes of one GPT
// layer (ROWS = batch x context rows, width 128, MLP 512), each fold against the separate
// passes it replaces, alternating over --rounds so a noisy host hits both alike:
//   bias: dW = Xᵀ·dY with dbias = Σ rows of dY in the same dispatch, against dW then a
//         row-sum pass (the four weight shapes of a layer: qkv, proj, fc, out);
//   gelu: fc2's dX = dY·W2ᵀ with GELU's derivative applied in its epilogue, against dX then
//         an activationBackward pass (768 x 128 -> 512 at the default ROWS);
//   act: fc1 (128 -> 512) with GELU applied in its epilogue and the value before it stored
//         beside (Graph::matmulActivation), against the product then an activation pass;
//   residual: the two projections that feed the residual stream (attention's 128 -> 128,
//         the MLP's 512 -> 128) with the residual added in their epilogue (Graph::matmulAdd),
//         against each product then an add pass;
//   stream: the residual stream's gradient added by the layer norm's backward kernel (its dx
//         addend), against a copy of it into dx that the kernel then adds to (ROWS x 128).
// The two results must agree (normalised error, tolerance 1e-5).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/layer_norm.h"
#include "vkgrad/ops/matmul.h"
#include "vkgrad/ops/reduce.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

constexpr double kTolerance = 1e-5;

// A buffer of random floats and its view (the view points at the buffer, so both stay put).
struct Tensor {
  std::unique_ptr<vk::Buffer> buffer;
  ops::TensorView view;
};

Tensor make(vk::Context& context, ops::Shape shape, uint32_t seed) {
  const std::vector<float> data = benchData(size_t(shape.numel()), -1.0f, 1.0f, seed);
  Tensor t{std::make_unique<vk::Buffer>(context.allocator().allocate(data.size() * 4)), {}};
  context.staging().upload(*t.buffer, 0, data.data(), data.size() * 4);
  t.view = ops::view(*t.buffer, shape);
  return t;
}

std::vector<float> read(vk::Context& context, const Tensor& t) {
  std::vector<float> out(size_t(t.view.shape.numel()));
  context.staging().download(*t.buffer, 0, out.data(), out.size() * 4);
  return out;
}

void declare(Cli& cli) {
  cli.option("fold", "bias, gelu, act, residual, stream or all", "all");
  cli.option("rows", "rows of the activations (the GPT's batch x context)", "768");
  cli.option("rounds", "alternating rounds of separate and folded", "3");
}

// One fold: record(rec, folded) records either path into the outputs; out() reads them back.
struct Fold {
  std::string name;
  std::function<void(vk::Recorder&, bool folded)> record;
  std::function<std::vector<float>()> out;
};

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const std::string which = cli.get("fold");
  if (which != "bias" && which != "gelu" && which != "act" && which != "residual" &&
      which != "stream" && which != "all")
    cli.fail("--fold must be bias, gelu, act, residual, stream or all, got '" + which + "'");
  const int64_t rows = cli.getInt("rows", 1, 1 << 20);
  const int rounds = int(cli.getInt("rounds", 1, 100));

  // bias: the four weight gradients of a layer, each with its bias gradient.
  const int64_t linears[][2] = {{128, 384}, {128, 128}, {128, 512}, {512, 128}};
  std::vector<Tensor> xs, ws, dys, dws, dbs;
  uint32_t seed = 1;
  for (const auto& l : linears) {
    xs.push_back(make(context, {rows, l[0]}, seed++));
    ws.push_back(make(context, {l[0], l[1]}, seed++));
    dys.push_back(make(context, {rows, l[1]}, seed++));
    dws.push_back(make(context, {l[0], l[1]}, seed++));
    dbs.push_back(make(context, {l[1]}, seed++));
  }
  // gelu: fc2 (512 -> 128) after GELU; x is fc1's output, h = gelu(x) fc2's input.
  Tensor h = make(context, {rows, 512}, seed++), x = make(context, {rows, 512}, seed++);
  Tensor w2 = make(context, {512, 128}, seed++), dc = make(context, {rows, 128}, seed++);
  Tensor dx = make(context, {rows, 512}, seed++);
  // act: fc1 = gelu(x1·W1 + b1) with the value before GELU (pre) kept.
  Tensor x1 = make(context, {rows, 128}, seed++), w1 = make(context, {128, 512}, seed++);
  Tensor b1 = make(context, {512}, seed++), fc1 = make(context, {rows, 512}, seed++);
  Tensor pre = make(context, {rows, 512}, seed++);
  // residual: r + h·W + b for attention's projection (128 -> 128) and the MLP's (512 -> 128).
  const int64_t projections[] = {128, 512};
  std::vector<Tensor> ins, weights, biases, sums;
  for (int64_t in : projections) {
    ins.push_back(make(context, {rows, in}, seed++));
    weights.push_back(make(context, {in, 128}, seed++));
    biases.push_back(make(context, {128}, seed++));
    sums.push_back(make(context, {rows, 128}, seed++));
  }
  Tensor stream = make(context, {rows, 128}, seed++);
  // stream: layer norm's backward over (rows, 128) with the stream's gradient ds as addend.
  Tensor ln_x = make(context, {rows, 128}, seed++), ln_gamma = make(context, {128}, seed++);
  Tensor ln_beta = make(context, {128}, seed++), ln_y = make(context, {rows, 128}, seed++);
  Tensor ln_mean = make(context, {rows}, seed++), ln_rstd = make(context, {rows}, seed++);
  Tensor ln_dy = make(context, {rows, 128}, seed++), ds = make(context, {rows, 128}, seed++);
  Tensor ln_dx = make(context, {rows, 128}, seed++), ln_dgamma = make(context, {128}, seed++);
  Tensor ln_dbeta = make(context, {128}, seed++);
  Tensor ln_scratch = make(context, {ops::layerNormBackwardScratch(rows, 128)}, seed++);
  {
    vk::Recorder rec(context);  // the statistics the backward reads
    ops::layerNorm(rec, ln_x.view, ln_gamma.view, ln_beta.view, ln_y.view, ln_mean.view,
                   ln_rstd.view);
    rec.submit();
  }

  std::vector<Fold> folds;
  auto wanted = [&](const char* fold) { return which == fold || which == "all"; };
  if (wanted("bias"))
    folds.push_back({"bias",
                     [&](vk::Recorder& rec, bool folded) {
                       for (size_t i = 0; i < xs.size(); ++i) {
                         const ops::TensorView* db = &dbs[i].view;
                         ops::matmulBackward(rec, xs[i].view, ws[i].view, dys[i].view,
                                             {nullptr, &dws[i].view, folded ? db : nullptr});
                         if (!folded) ops::sumRows(rec, dys[i].view, *db);
                       }
                     },
                     [&] {
                       std::vector<float> all;
                       for (size_t i = 0; i < xs.size(); ++i)
                         for (const Tensor* t : {&dws[i], &dbs[i]}) {
                           const std::vector<float> v = read(context, *t);
                           all.insert(all.end(), v.begin(), v.end());
                         }
                       return all;
                     }});
  if (wanted("gelu"))
    folds.push_back({"gelu",
                     [&](vk::Recorder& rec, bool folded) {
                       ops::MatmulGrads grads{&dx.view};
                       if (folded)
                         grads.da_act_x = &x.view, grads.da_act = ops::Activation::GeluTanh;
                       ops::matmulBackward(rec, h.view, w2.view, dc.view, grads);
                       if (!folded)
                         ops::activationBackward(rec, ops::Activation::GeluTanh, x.view, {},
                                                 dx.view, dx.view);
                     },
                     [&] { return read(context, dx); }});
  if (wanted("act"))
    folds.push_back({"act",
                     [&](vk::Recorder& rec, bool folded) {
                       ops::MatmulOptions o;
                       o.bias = &b1.view;
                       if (folded) o.act = ops::Activation::GeluTanh, o.act_pre = &pre.view;
                       ops::matmul(rec, x1.view, w1.view, folded ? fc1.view : pre.view, o);
                       if (!folded)
                         ops::activation(rec, ops::Activation::GeluTanh, pre.view, fc1.view);
                     },
                     [&] {
                       std::vector<float> all = read(context, fc1), before = read(context, pre);
                       all.insert(all.end(), before.begin(), before.end());
                       return all;
                     }});
  if (wanted("residual"))
    folds.push_back({"residual",
                     [&](vk::Recorder& rec, bool folded) {
                       for (size_t i = 0; i < ins.size(); ++i) {
                         ops::MatmulOptions o;
                         o.bias = &biases[i].view;
                         if (folded) o.residual = &stream.view;
                         ops::matmul(rec, ins[i].view, weights[i].view, sums[i].view, o);
                         if (!folded) ops::add(rec, sums[i].view, stream.view, sums[i].view);
                       }
                     },
                     [&] {
                       std::vector<float> all;
                       for (const Tensor& t : sums) {
                         const std::vector<float> v = read(context, t);
                         all.insert(all.end(), v.begin(), v.end());
                       }
                       return all;
                     }});
  if (wanted("stream"))
    folds.push_back({"stream",
                     [&](vk::Recorder& rec, bool folded) {
                       const ops::Write over = ops::Write::Overwrite;
                       if (!folded) ops::addBackward(rec, ds.view, ln_dx.view, {}, over, over);
                       ops::layerNormBackward(
                           rec, ln_x.view, ln_gamma.view, ln_mean.view, ln_rstd.view, ln_dy.view,
                           ln_dx.view, ln_dgamma.view, ln_dbeta.view, ln_scratch.view,
                           folded ? over : ops::Write::Accumulate, over,
                           ops::LayerNormVariant::Auto, ops::LayerNormParamsVariant::Auto,
                           folded ? &ds.view : nullptr);
                     },
                     [&] { return read(context, ln_dx); }});

  std::fprintf(stderr,
               "vkgrad-bench: folds at %lld rows on %s, %d rounds of %d warm-up + %d "
               "timed runs each way\n",
               (long long)rows, context.info().name.c_str(), rounds, options.warmup, options.iters);
  int exit_code = 0;
  for (const Fold& fold : folds) {
    Timing timing[2];
    std::vector<float> result[2];
    for (int round = 0; round < rounds; ++round)
      for (int folded = 0; folded < 2; ++folded) {
        const Timing t = timeRuns(context, options.warmup, options.iters,
                                  [&](vk::Recorder& rec) { fold.record(rec, folded != 0); });
        timing[folded].ms.insert(timing[folded].ms.end(), t.ms.begin(), t.ms.end());
        timing[folded].cpu_ms += t.cpu_ms / rounds;
        if (round == 0) result[folded] = fold.out();
      }
    const double error = normalisedError(result[1], result[0]);
    const Stats separate = stats(timing[0].ms);
    for (int folded = 0; folded < 2; ++folded) {
      const Stats t = stats(timing[folded].ms);
      const char* variant = folded ? "folded" : "separate";
      const double e = folded ? error : 0.0;
      if (options.json) {
        printJsonLine({{"op", "folds"},
                       {"fold", fold.name},
                       {"rows", rows},
                       {"variant", variant},
                       {"ms", t.median},
                       {"min_ms", t.min},
                       {"max_ms", t.max},
                       {"ratio", t.median / separate.median},
                       {"iters", options.iters * rounds},
                       {"warmup", options.warmup},
                       {"cpu_ms", timing[folded].cpu_ms},
                       {"checked", true},
                       {"error", e},
                       {"device", context.info().name}});
      } else {
        std::printf(
            "folds %-8s %5lld rows  %-8s %9.3f ms  %.2f of separate  (min %.3f, max "
            "%.3f)  error %.2g%s\n",
            fold.name.c_str(), (long long)rows, variant, t.median, t.median / separate.median,
            t.min, t.max, e, e <= kTolerance ? "" : "  WRONG");
      }
      std::fflush(stdout);
    }
    if (!(error <= kTolerance)) {
      std::fprintf(stderr, "vkgrad-bench: folds %s is WRONG: normalised error %g > %g\n",
                   fold.name.c_str(), error, kTolerance);
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace

const BenchOp& foldsBench() {
  static const BenchOp op{"folds",
                          "the matmul's folds at one GPT layer's shapes (bias gradient in dW's "
                          "dispatch, GELU's derivative in dX's epilogue, the residual add in the "
                          "projections' epilogue, the stream's gradient in layer norm's backward) "
                          "against the separate passes, alternating",
                          declare, run};
  return op;
}

}  // namespace vkgrad::apps
