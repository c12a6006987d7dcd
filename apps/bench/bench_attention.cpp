// vkgrad-bench attention: flash attention and the op-library reference (ops/attention_unfused.h:
// matmul, softmax, matmul, storing P) side by side, forward (and backward with --backward) on
// random (B, T, H, D) inputs. GFLOP/s count the multiply-adds of the visible (query, key) pairs:
// forward 2 products (Q·Kᵀ and P·V) = 4·pairs·D; backward 5 (S recomputed, dV, dP, dQ, dK)
// = 10·pairs·D; causal with Tq = Tk has T(T+1)/2 pairs per head, about half. device_bytes is
// the peak of what the engine allocated for the run: inputs, outputs, LSE, gradients,
// scratch; no T x T buffer.
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/ops/attention_unfused.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// The fp64 CPU check costs about 14·pairs·D flops on one core; above this it needs --check.
constexpr double kCheckLimit = 4e9;
constexpr double kCheckTolerance = 1e-4;

void declare(Cli& cli) {
  cli.option("b", "batch", "1");
  cli.option("h", "heads", "4");
  cli.option("t", "sequence length (queries and keys)", "1024");
  cli.option("d", "head dim", "64");
  cli.flag("causal", "causal mask (query i sees keys 0..i)");
  cli.flag("backward", "time forward + backward (dQ, dK, dV) instead of forward alone");
  cli.option("variant", "flash kernels: auto, shared, texel or all", "auto");
  cli.option("impl", "flash, reference (the op-library path that stores P) or both", "both");
}

struct Run {
  Timing timing;
  double error = NAN;
  bool checked = false;
  uint64_t device_bytes = 0;
};

Run runImpl(vk::Context& context, const BenchOptions& options, int64_t b, int64_t h, int64_t t,
            int64_t d, bool causal, bool backward, bool check, ops::AttentionVariant variant,
            bool flash) {
  vk::Allocator& allocator = context.allocator();
  const uint64_t before = allocator.bytesInUse();
  allocator.resetPeak();
  const int64_t n = b * t * h * d;
  const ops::Shape shape{b, t, h, d};
  std::vector<vk::Buffer> buffers;
  auto tensor = [&](int64_t elements) -> const vk::Buffer& {
    buffers.push_back(allocator.allocate(uint64_t(elements) * 4));
    return buffers.back();
  };
  buffers.reserve(12);
  const vk::Buffer &q = tensor(n), &k = tensor(n), &v = tensor(n), &o = tensor(n),
                   &lse = tensor(b * h * t);
  const std::vector<float> hq = benchData(size_t(n), -1, 1, 1), hk = benchData(size_t(n), -1, 1, 2),
                           hv = benchData(size_t(n), -1, 1, 3),
                           hdo = benchData(size_t(n), -1, 1, 4);
  context.staging().upload(q, 0, hq.data(), hq.size() * 4);
  context.staging().upload(k, 0, hk.data(), hk.size() * 4);
  context.staging().upload(v, 0, hv.data(), hv.size() * 4);
  const ops::AttentionOptions attn{causal, 0.0f, variant};
  const ops::AttentionTensor tq{ops::view(q, shape)}, tk{ops::view(k, shape)},
      tv{ops::view(v, shape)}, to{ops::view(o, shape)};
  const ops::TensorView tlse = ops::view(lse, {b, h, t});

  Run run;
  std::unique_ptr<ops::UnfusedAttention> unfused;
  if (!flash) unfused = std::make_unique<ops::UnfusedAttention>(context, shape, shape, attn);
  auto forward = [&](vk::Recorder& rec) {
    if (flash)
      ops::attention(rec, tq, tk, tv, to, tlse, attn);
    else
      unfused->forward(rec, tq.view, tk.view, tv.view, to.view);
  };
  if (!backward) {
    run.timing = timeRuns(context, options.warmup, options.iters, forward);
  } else {
    const vk::Buffer &dout = tensor(n), &dq = tensor(n), &dk = tensor(n), &dv = tensor(n),
                     &scratch = tensor(ops::attentionBackwardScratch(tq));
    context.staging().upload(dout, 0, hdo.data(), hdo.size() * 4);
    run.timing = timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
      forward(rec);
      if (flash)
        ops::attentionBackward(rec, tq, tk, tv, to, tlse, {ops::view(dout, shape)},
                               {ops::view(dq, shape)}, {ops::view(dk, shape)},
                               {ops::view(dv, shape)}, ops::view(scratch, {b * h * t}), attn);
      else
        unfused->backward(rec, ops::view(dout, shape), ops::view(dq, shape), ops::view(dk, shape),
                          ops::view(dv, shape));
    });
    if (check) {
      std::vector<float> want_q(n), want_k(n), want_v(n), got(n);
      ops::ref::attentionBackward({b, h, t, t, d, causal}, hq.data(), hk.data(), hv.data(),
                                  hdo.data(), want_q.data(), want_k.data(), want_v.data());
      for (auto [buffer, want] : {std::pair{&dq, &want_q}, {&dk, &want_k}, {&dv, &want_v}}) {
        context.staging().download(*buffer, 0, got.data(), got.size() * 4);
        run.error = std::isnan(run.error) ? 0 : run.error;
        run.error = std::max(run.error, normalisedError(got, *want));
      }
    }
  }
  run.device_bytes = allocator.peakBytesInUse() - before;
  if (check) {
    std::vector<float> want(n), want_lse(b * h * t), got(n);
    ops::ref::attention({b, h, t, t, d, causal}, hq.data(), hk.data(), hv.data(), want.data(),
                        want_lse.data());
    context.staging().download(o, 0, got.data(), got.size() * 4);
    run.error = std::max(std::isnan(run.error) ? 0 : run.error, normalisedError(got, want));
    run.checked = true;
  }
  return run;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t b = cli.getInt("b", 1, 1 << 16), h = cli.getInt("h", 1, 1 << 16),
                t = cli.getInt("t", 1, 1 << 20), d = cli.getInt("d", 1, 256);
  const bool causal = cli.has("causal"), backward = cli.has("backward");
  const double pairs =
      double(b * h) * (causal ? double(t) * double(t + 1) / 2 : double(t) * double(t));
  const double flop = (backward ? 14.0 : 4.0) * pairs * double(d);
  const bool check = options.check || 14.0 * pairs * double(d) <= kCheckLimit;
  std::fprintf(stderr, "vkgrad-bench: attention B %lld H %lld T %lld D %lld%s%s on %s\n",
               (long long)b, (long long)h, (long long)t, (long long)d, causal ? " causal" : "",
               backward ? " +backward" : "", context.info().name.c_str());

  std::vector<ops::AttentionVariant> variants;
  for (auto v :
       {ops::AttentionVariant::Auto, ops::AttentionVariant::Shared, ops::AttentionVariant::Texel})
    if (cli.get("variant") == ops::attentionVariantName(v)) variants = {v};
  if (cli.get("variant") == "all")
    variants = {ops::AttentionVariant::Shared, ops::AttentionVariant::Texel};
  if (variants.empty())
    cli.fail("--variant must be auto, shared, texel or all, got '" + cli.get("variant") + "'");
  const std::string impl = cli.get("impl");
  if (impl != "flash" && impl != "reference" && impl != "both")
    cli.fail("--impl must be flash, reference or both, got '" + impl + "'");

  // The flash variants asked for, then the op-library reference once.
  struct Candidate {
    bool flash;
    ops::AttentionVariant variant;
  };
  std::vector<Candidate> candidates;
  if (impl != "reference")
    for (auto v : variants) candidates.push_back({true, v});
  if (impl != "flash") candidates.push_back({false, ops::AttentionVariant::Auto});

  int exit_code = 0;
  for (const auto [flash, variant] : candidates) {
    const char* name = flash ? "flash" : "reference";
    Run r;
    try {
      r = runImpl(context, options, b, h, t, d, causal, backward, check, variant, flash);
    } catch (const Error& e) {
      // The reference stores B·H·T·T scores; at long T they exceed the device. With --variant
      // all, a variant the device cannot run is left out.
      if (flash && variants.size() == 1) throw;
      std::fprintf(stderr, "vkgrad-bench: attention %s%s%s skipped: %s\n", name,
                   flash ? " " : "", flash ? ops::attentionVariantName(variant) : "", e.what());
      continue;
    }
    const Stats s = stats(r.timing.ms);
    const double gflops = flop / (s.median * 1e6);
    const bool ok = !r.checked || r.error <= kCheckTolerance;
    if (options.json) {
      printJsonLine({{"op", "attention"},
                     {"impl", name},
                     {"variant", flash ? ops::attentionVariantName(variant) : "ops"},
                     {"b", b},
                     {"h", h},
                     {"t", t},
                     {"d", d},
                     {"causal", causal},
                     {"backward", backward},
                     {"ms", s.median},
                     {"min_ms", s.min},
                     {"max_ms", s.max},
                     {"gflop", flop * 1e-9},
                     {"gflops", gflops},
                     {"device_bytes", r.device_bytes},
                     {"iters", options.iters},
                     {"warmup", options.warmup},
                     {"cpu_ms", r.timing.cpu_ms},
                     {"checked", r.checked},
                     {"error", r.error},
                     {"device", context.info().name}});
    } else {
      std::printf(
          "attention %-9s %-6s B%lld H%lld T%lld D%lld%s%s  %10.3f ms  %9.2f GFLOP/s  "
          "%8.1f MiB on device  (min %.3f, max %.3f)  %s\n",
          name, flash ? ops::attentionVariantName(variant) : "ops", (long long)b, (long long)h, (long long)t, (long long)d, causal ? " causal" : "",
          backward ? " +bwd" : "", s.median, gflops, double(r.device_bytes) / (1 << 20), s.min,
          s.max,
          r.checked ? ("error " + std::to_string(r.error) + (ok ? "" : "  WRONG")).c_str()
                    : "not checked (large; --check forces it)");
    }
    std::fflush(stdout);
    if (!ok) {
      std::fprintf(stderr, "vkgrad-bench: attention %s is WRONG: normalised error %g > %g\n", name,
                   r.error, kCheckTolerance);
      exit_code = 1;
    }
  }
  return exit_code;
}

}  // namespace

const BenchOp& attentionBench() {
  static const BenchOp op{
      "attention", "flash attention and the op-library reference over (B, T, H, D)", declare, run};
  return op;
}

}  // namespace vkgrad::apps
