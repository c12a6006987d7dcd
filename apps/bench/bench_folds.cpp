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

// The tensors' values one after another.
std::vector<float> read(vk::Context& context, const std::vector<const Tensor*>& tensors) {
  std::vector<float> all;
  for (const Tensor* t : tensors) {
    std::vector<float> out(size_t(t->view.shape.numel()));
    context.staging().download(*t->buffer, 0, out.data(), out.size() * 4);
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

void declare(Cli& cli) {
  cli.option("fold", "bias, gelu, act, residual, stream or all", "all");
  cli.option("rows", "rows of the activations (the GPT's batch x context)", "768");
  cli.option("rounds", "alternating rounds of separate and folded", "3");
}

// One GPT layer's tensors that the folds read and write, random, at `rows` rows.
struct Layer {
  // bias: the four weight gradients of a layer, each with its bias gradient.
  std::vector<Tensor> xs, ws, dys, dws, dbs;
  // gelu: fc2 (512 -> 128) after GELU; x is fc1's output, h = gelu(x) fc2's input.
  Tensor h, x, w2, dc, dx;
  // act: fc1 = gelu(x1·W1 + b1) with the value before GELU (pre) kept.
  Tensor x1, w1, b1, fc1, pre;
  // residual: r + h·W + b for attention's projection (128 -> 128) and the MLP's (512 -> 128).
  std::vector<Tensor> ins, weights, biases, sums;
  Tensor stream;
  // stream: layer norm's backward over (rows, 128) with the stream's gradient ds as addend.
  Tensor ln_x, ln_gamma, ln_beta, ln_y, ln_mean, ln_rstd, ln_dy, ds, ln_dx, ln_dgamma, ln_dbeta,
      ln_scratch;
};

Layer makeLayer(vk::Context& context, int64_t rows) {
  Layer l;
  uint32_t seed = 1;
  auto random = [&](ops::Shape shape) { return make(context, shape, seed++); };
  const int64_t linears[][2] = {{128, 384}, {128, 128}, {128, 512}, {512, 128}};
  for (const auto& [in, out] : linears) {
    l.xs.push_back(random({rows, in}));
    l.ws.push_back(random({in, out}));
    l.dys.push_back(random({rows, out}));
    l.dws.push_back(random({in, out}));
    l.dbs.push_back(random({out}));
  }
  l.h = random({rows, 512}), l.x = random({rows, 512}), l.w2 = random({512, 128});
  l.dc = random({rows, 128}), l.dx = random({rows, 512});
  l.x1 = random({rows, 128}), l.w1 = random({128, 512}), l.b1 = random({512});
  l.fc1 = random({rows, 512}), l.pre = random({rows, 512});
  for (int64_t in : {128, 512}) {
    l.ins.push_back(random({rows, in}));
    l.weights.push_back(random({in, 128}));
    l.biases.push_back(random({128}));
    l.sums.push_back(random({rows, 128}));
  }
  l.stream = random({rows, 128});
  l.ln_x = random({rows, 128}), l.ln_gamma = random({128}), l.ln_beta = random({128});
  l.ln_y = random({rows, 128}), l.ln_mean = random({rows}), l.ln_rstd = random({rows});
  l.ln_dy = random({rows, 128}), l.ds = random({rows, 128}), l.ln_dx = random({rows, 128});
  l.ln_dgamma = random({128}), l.ln_dbeta = random({128});
  l.ln_scratch = random({ops::layerNormBackwardScratch(rows, 128)});
  vk::Recorder rec(context);  // the statistics the backward reads
  ops::layerNorm(rec, l.ln_x.view, l.ln_gamma.view, l.ln_beta.view, l.ln_y.view, l.ln_mean.view,
                 l.ln_rstd.view);
  rec.submit();
  return l;
}

// One fold: record(rec, folded) records either path into the outputs; out() reads them back.
struct Fold {
  std::string name;
  std::function<void(vk::Recorder&, bool folded)> record;
  std::function<std::vector<float>()> out;
};

Fold biasFold(vk::Context& context, Layer& l) {
  return {"bias",
          [&l](vk::Recorder& rec, bool folded) {
            for (size_t i = 0; i < l.xs.size(); ++i) {
              const ops::TensorView* db = &l.dbs[i].view;
              ops::matmulBackward(rec, l.xs[i].view, l.ws[i].view, l.dys[i].view,
                                  {nullptr, &l.dws[i].view, folded ? db : nullptr});
              if (!folded) ops::sumRows(rec, l.dys[i].view, *db);
            }
          },
          [&context, &l] {
            std::vector<const Tensor*> outs;
            for (size_t i = 0; i < l.xs.size(); ++i)
              outs.insert(outs.end(), {&l.dws[i], &l.dbs[i]});
            return read(context, outs);
          }};
}

Fold geluFold(vk::Context& context, Layer& l) {
  return {"gelu",
          [&l](vk::Recorder& rec, bool folded) {
            ops::MatmulGrads grads{&l.dx.view};
            if (folded) grads.da_act_x = &l.x.view, grads.da_act = ops::Activation::GeluTanh;
            ops::matmulBackward(rec, l.h.view, l.w2.view, l.dc.view, grads);
            if (!folded)
              ops::activationBackward(rec, ops::Activation::GeluTanh, l.x.view, {}, l.dx.view,
                                      l.dx.view);
          },
          [&context, &l] { return read(context, {&l.dx}); }};
}

Fold actFold(vk::Context& context, Layer& l) {
  return {"act",
          [&l](vk::Recorder& rec, bool folded) {
            ops::MatmulOptions o;
            o.bias = &l.b1.view;
            if (folded) o.act = ops::Activation::GeluTanh, o.act_pre = &l.pre.view;
            ops::matmul(rec, l.x1.view, l.w1.view, folded ? l.fc1.view : l.pre.view, o);
            if (!folded) ops::activation(rec, ops::Activation::GeluTanh, l.pre.view, l.fc1.view);
          },
          [&context, &l] {
            return read(context, {&l.fc1, &l.pre});
          }};
}

Fold residualFold(vk::Context& context, Layer& l) {
  return {"residual",
          [&l](vk::Recorder& rec, bool folded) {
            for (size_t i = 0; i < l.ins.size(); ++i) {
              ops::MatmulOptions o;
              o.bias = &l.biases[i].view;
              if (folded) o.residual = &l.stream.view;
              ops::matmul(rec, l.ins[i].view, l.weights[i].view, l.sums[i].view, o);
              if (!folded) ops::add(rec, l.sums[i].view, l.stream.view, l.sums[i].view);
            }
          },
          [&context, &l] {
            std::vector<const Tensor*> outs;
            for (const Tensor& t : l.sums) outs.push_back(&t);
            return read(context, outs);
          }};
}

Fold streamFold(vk::Context& context, Layer& l) {
  return {"stream",
          [&l](vk::Recorder& rec, bool folded) {
            const ops::Write over = ops::Write::Overwrite;
            if (!folded) ops::addBackward(rec, l.ds.view, l.ln_dx.view, {}, over, over);
            ops::layerNormBackward(
                rec, l.ln_x.view, l.ln_gamma.view, l.ln_mean.view, l.ln_rstd.view, l.ln_dy.view,
                l.ln_dx.view, l.ln_dgamma.view, l.ln_dbeta.view, l.ln_scratch.view,
                folded ? over : ops::Write::Accumulate, over, ops::LayerNormVariant::Auto,
                ops::LayerNormParamsVariant::Auto, folded ? &l.ds.view : nullptr);
          },
          [&context, &l] { return read(context, {&l.ln_dx}); }};
}

// The folds --fold names ("all": every one), in the order of the file comment.
std::vector<Fold> makeFolds(vk::Context& context, Layer& l, const std::string& which) {
  std::vector<Fold> folds;
  for (Fold (*make_fold)(vk::Context&, Layer&) :
       {biasFold, geluFold, actFold, residualFold, streamFold}) {
    Fold fold = make_fold(context, l);
    if (which == fold.name || which == "all") folds.push_back(std::move(fold));
  }
  return folds;
}

// Both paths' timings over every round (0: separate, 1: folded) and their results after the
// first round.
struct FoldRuns {
  Timing timing[2];
  std::vector<float> result[2];
};

// Alternates the two paths for `rounds` rounds, so a noisy host hits both alike.
FoldRuns timeFold(vk::Context& context, const BenchOptions& options, const Fold& fold, int rounds) {
  FoldRuns runs;
  for (int round = 0; round < rounds; ++round)
    for (int folded = 0; folded < 2; ++folded) {
      const Timing t = timeRuns(context, options.warmup, options.iters,
                                [&](vk::Recorder& rec) { fold.record(rec, folded != 0); });
      runs.timing[folded].ms.insert(runs.timing[folded].ms.end(), t.ms.begin(), t.ms.end());
      runs.timing[folded].cpu_ms += t.cpu_ms / rounds;
      if (round == 0) runs.result[folded] = fold.out();
    }
  return runs;
}

// Prints both paths' lines; returns 1 when the folded result differs from the separate one.
int reportFold(const vk::Context& context, const BenchOptions& options, const Fold& fold,
               int64_t rows, int rounds, const FoldRuns& runs) {
  const double error = normalisedError(runs.result[1], runs.result[0]);
  const Stats separate = stats(runs.timing[0].ms);
  for (int folded = 0; folded < 2; ++folded) {
    const Stats t = stats(runs.timing[folded].ms);
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
                     {"cpu_ms", runs.timing[folded].cpu_ms},
                     {"checked", true},
                     {"error", e},
                     {"device", context.info().name}});
    } else {
      std::printf(
          "folds %-8s %5lld rows  %-8s %9.3f ms  %.2f of separate  (min %.3f, max "
          "%.3f)  error %.2g%s\n",
          fold.name.c_str(), (long long)rows, variant, t.median, t.median / separate.median, t.min,
          t.max, e, e <= kTolerance ? "" : "  WRONG");
    }
    std::fflush(stdout);
  }
  return failIfWrong("folds " + fold.name, error, kTolerance);
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const std::string which =
      parseChoice(cli, "fold", {"bias", "gelu", "act", "residual", "stream", "all"});
  const int64_t rows = cli.getInt("rows", 1, 1 << 20);
  const int rounds = int(cli.getInt("rounds", 1, 100));
  Layer layer = makeLayer(context, rows);
  const std::vector<Fold> folds = makeFolds(context, layer, which);
  std::fprintf(stderr,
               "vkgrad-bench: folds at %lld rows on %s, %d rounds of %d warm-up + %d "
               "timed runs each way\n",
               (long long)rows, context.info().name.c_str(), rounds, options.warmup, options.iters);
  int exit_code = 0;
  for (const Fold& fold : folds)
    exit_code |=
        reportFold(context, options, fold, rows, rounds, timeFold(context, options, fold, rounds));
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
